#!/bin/bash
# Scratch GPU pass (NOTES v26): hand-over variants (order 2: dV after the dS fence), and their correctness.
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
S=packages/flashattn2/benchmarks/scratch
GB_ORDER=2 GB_HV=3 GBWD=gbwd_v4 ONLY_D=64 timeout 100 python $S/gbwd_check.py check > $OUT/check-o2-hv3.log 2>&1; echo check o2 rc=$?
timeout 300 python $S/run_v26b.py > $OUT/handover.log 2>&1; echo handover rc=$?
grep -v '^{' $OUT/handover.log; cut -c1-400 $OUT/check-o2-hv3.log
