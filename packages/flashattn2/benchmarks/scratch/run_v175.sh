#!/usr/bin/env bash
# scratch (v175): the three-consumer forward as three 4-warp partitions against the package's, on the GPU machine.
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 420 python3 packages/flashattn2/benchmarks/scratch/ab_t4.py 2>&1 | tee "$OUT/ab_t4.log" | grep -v Warning
