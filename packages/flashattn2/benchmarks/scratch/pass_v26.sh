#!/bin/bash
# Scratch GPU pass (NOTES v26): correctness, determinism, timing of gbwd_v4.
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > $OUT/gpu.txt
GBWD=gbwd_v4 timeout 200 python $S/gbwd_check.py check > $OUT/check.log 2>&1; echo check rc=$?
GBWD=gbwd_v4 timeout 120 python $S/gbwd_check.py determinism > $OUT/det.log 2>&1; echo det rc=$?
timeout 260 python $S/run_v26.py > $OUT/timing.log 2>&1; echo timing rc=$?
tail -3 $OUT/check.log $OUT/det.log; cat $OUT/timing.log | cut -c1-1500
