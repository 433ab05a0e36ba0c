#!/usr/bin/env bash
# scratch (v176): the GPU tests, then the package's forward against the one before it and cuDNN's.
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
bash packages/flashattn2/benchmarks/gpu_pass.sh tests
timeout 330 python3 packages/flashattn2/benchmarks/scratch/ab_v176.py 2>&1 | tee "$OUT/ab_v176.log" | grep -v Warning
