#!/usr/bin/env bash
# scratch (v184): one dS fence per step where dK's dS^T comes from shared memory, against the package's fence per part.
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
SUSTAIN_S=1.0 timeout 400 python3 packages/flashattn2/benchmarks/scratch/ab_fence1.py 2>&1 | tee "$OUT/ab_fence1.log" \
  | grep -v Warning
