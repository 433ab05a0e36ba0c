#!/bin/bash
# scratch (v123): smoke, accuracy, then the A/B of the head-dim-128 halves layout
set -o pipefail
export PYTHONPATH=packages/flashattn2/src
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
python packages/flashattn2/benchmarks/scratch/ab_halves.py smoke 2>&1 | tee "$OUT/smoke.log" || exit 1
python packages/flashattn2/benchmarks/scratch/ab_halves.py check 2>&1 | tee "$OUT/check.log" || exit 1
python packages/flashattn2/benchmarks/scratch/ab_halves.py all-timed 2>&1 | tee "$OUT/ab.log"
