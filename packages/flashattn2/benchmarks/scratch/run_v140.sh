#!/usr/bin/env bash
# v140: ncu of v138's head-dim-256 forward beside cuDNN's at (2, 16, 4096, 256), as v111 measured the 64-key one.
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
m=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,lts__t_sectors_op_read.sum,sm__cycles_elapsed.avg,l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum
for mask in full causal; do
  timeout 150 ncu -k 'regex:hopper_forward|fprop' --metrics $m --section SpeedOfLight --section WarpStateStats \
    python packages/flashattn2/benchmarks/scratch/ncu_fwd_d256.py $mask > "$OUT/ncu-fwd-d256-$mask.txt" 2>&1
  grep -E "hopper_forward|fprop|hmma|sm__cycles_elapsed|inst_executed|lts__t_bytes|Stall|Warp Cycles Per Issued" "$OUT/ncu-fwd-d256-$mask.txt" | head -40
done
