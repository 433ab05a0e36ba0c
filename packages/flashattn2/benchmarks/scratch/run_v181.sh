#!/usr/bin/env bash
# scratch (v181): the three-consumer forward with its masked key tiles in a loop of their own, against the package's.
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 400 python3 packages/flashattn2/benchmarks/scratch/ab_fpeel.py 2>&1 | tee "$OUT/ab_fpeel.log" | grep -v Warning
