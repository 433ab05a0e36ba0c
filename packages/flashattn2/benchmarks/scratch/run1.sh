#!/usr/bin/env bash
# Session 27, call 1: the GPU tests, matrix, host and first calls at HEAD; ncu of the head-dim-256 forward.
cd "$(dirname "$0")/../../../.."
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
OUT=$OUT bash packages/flashattn2/benchmarks/gpu_pass.sh tests matrix host first
m=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,lts__t_sectors_op_read.sum,sm__cycles_elapsed.avg,l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum
for mask in full causal; do
  timeout 90 ncu -k 'regex:hopper_forward|fprop' --metrics $m --section SpeedOfLight \
    python packages/flashattn2/benchmarks/scratch/ncu_fwd_d256.py $mask > $OUT/ncu-fwd-d256-$mask.txt 2>&1
done
ls -la $OUT
