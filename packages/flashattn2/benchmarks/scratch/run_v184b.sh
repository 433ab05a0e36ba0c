#!/usr/bin/env bash
# scratch (v184, second A/B): the package with one dS fence against 3880a04's, then the GPU tests.
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks PYTHONUNBUFFERED=1
git show 3880a04:packages/flashattn2/src/flashattn2/_gluon_backward.py \
  > packages/flashattn2/benchmarks/scratch/gb_prev.py  # the package before v184
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
SUSTAIN_S=1.0 timeout 200 python3 packages/flashattn2/benchmarks/scratch/ab_v184b.py 2>&1 | tee "$OUT/ab_v184b.log" \
  | grep -v Warning
OUT=$OUT bash packages/flashattn2/benchmarks/gpu_pass.sh tests 2>&1 | tail -3
