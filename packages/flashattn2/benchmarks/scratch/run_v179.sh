#!/usr/bin/env bash
# scratch (v179): the head-dim-64 backward with a dQ warpgroup and separate consumer partitions against the package's.
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
AB_SHAPES=6 timeout 480 python3 packages/flashattn2/benchmarks/scratch/ab_sep.py 2>&1 | tee "$OUT/ab_sep.log" | grep -v Warning
