#!/bin/bash
# Scratch GPU pass (NOTES v28): ncu of the v26 kernel, deterministic against atomic order, (1, 16, 8192, 64) causal.
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
S=packages/flashattn2/benchmarks/scratch
timeout 400 ncu -k regex:_attention_backward_kernel -c 2 --section SpeedOfLight --section WarpStateStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SchedulerStats \
  python $S/ncu_v28.py > $OUT/ncu.txt 2>&1; echo ncu rc=$?
grep -E "attention_backward|Duration|Issue Slots Busy|Stall|stall|Warp Cycles|Shared|Eligible|Active Warps|Tensor|L2|pipeline" $OUT/ncu.txt | cut -c1-200 | head -80
