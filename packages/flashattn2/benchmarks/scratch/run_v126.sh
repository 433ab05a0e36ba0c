#!/bin/bash
# scratch (v126): the dQ chain's cost in the causal Hopper backward
set -o pipefail
export PYTHONPATH=packages/flashattn2/src
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
python packages/flashattn2/benchmarks/scratch/ab_diag.py smoke 2>&1 | tee "$OUT/smoke.log" || exit 1
python packages/flashattn2/benchmarks/scratch/ab_diag.py 2>&1 | tee "$OUT/ab_diag_lpt.log"
