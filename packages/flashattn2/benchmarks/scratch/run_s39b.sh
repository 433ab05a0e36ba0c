#!/usr/bin/env bash
# session 39, call 3 (H200): ncu of the headline's three-consumer Hopper forward beside cuDNN's forward (never
# profiled since v150), clocks left alone; the same counters as v143.
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
python $S/ncu_pass.py 1 16 16384 64 causal fwd
m=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg,smsp__inst_executed.sum,sm__inst_executed_pipe_xu.sum,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_active,gpc__cycles_elapsed.avg.per_second
timeout 200 ncu --clock-control none -k 'regex:hopper_forward|fprop' --metrics $m --section SpeedOfLight --section WarpStateStats --section LaunchStats \
  python $S/ncu_pass.py 1 16 16384 64 causal fwd > $OUT/ncu-forward.txt 2>&1
grep -E "^  [a-zA-Z_]|hmma|sm__cycles_elapsed|inst_executed|pipe_xu|pipe_shared|issue_active|per_second|Stall|Warp Cycles Per Issued|Registers Per|Grid Size|Block Size|Dynamic Shared|Duration" $OUT/ncu-forward.txt | head -80
