#!/bin/bash
# scratch (v127): the dQ writers' early buffer release
set -o pipefail
export PYTHONPATH=packages/flashattn2/src
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
python packages/flashattn2/benchmarks/scratch/ab_early.py smoke 2>&1 | tee "$OUT/smoke.log" || exit 1
python packages/flashattn2/benchmarks/scratch/ab_early.py 2>&1 | tee "$OUT/ab_early.log"
