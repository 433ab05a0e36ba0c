#!/bin/bash
# Scratch GPU pass (NOTES v29): correctness and determinism with one barrier freeing the Q/dO slot and the dS buffer, then timing.
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
S=packages/flashattn2/benchmarks/scratch
export GBWD=gbwd_v4 GB_ORDER=2 GB_HV=131 GB_DQB=2
ONLY_D=64 timeout 100 python $S/gbwd_check.py check > $OUT/check-v29.log 2>&1; echo check rc=$?
ONLY_D=64 timeout 100 python $S/gbwd_check.py determinism > $OUT/det-v29.log 2>&1; echo det rc=$?
unset GB_ORDER GB_HV GB_DQB
timeout 200 python $S/run_v29.py > $OUT/timing-v29.log 2>&1; echo timing rc=$?
grep -v Warn $OUT/timing-v29.log | cut -c1-300; cut -c1-260 $OUT/check-v29.log | grep -v Warn; cat $OUT/det-v29.log
