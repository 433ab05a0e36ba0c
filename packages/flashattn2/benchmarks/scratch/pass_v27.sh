#!/bin/bash
# Scratch GPU pass (NOTES v27): correctness and determinism of the pipelined deterministic writer, then timing.
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
S=packages/flashattn2/benchmarks/scratch
export GBWD=gbwd_v4 GB_ORDER=2 GB_HV=35 GB_DQB=3
ONLY_D=64 timeout 100 python $S/gbwd_check.py check > $OUT/check-v27.log 2>&1; echo check rc=$?
ONLY_D=64 timeout 100 python $S/gbwd_check.py determinism > $OUT/det-v27.log 2>&1; echo det rc=$?
unset GB_ORDER GB_HV GB_DQB
timeout 280 python $S/run_v27.py > $OUT/timing-v27.log 2>&1; echo timing rc=$?
cat $OUT/timing-v27.log | grep -v Warn | cut -c1-300; cut -c1-330 $OUT/check-v27.log | grep -v Warn; cat $OUT/det-v27.log
