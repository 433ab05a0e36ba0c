#!/usr/bin/env bash
# scratch (v176): the three-4-warp-partition forward with Gluon's waits and arrives, against v175's and the package's.
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 420 python3 packages/flashattn2/benchmarks/scratch/ab_t4n.py 2>&1 | tee "$OUT/ab_t4n.log" | grep -v Warning
