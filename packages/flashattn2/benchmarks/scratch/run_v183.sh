#!/usr/bin/env bash
# scratch (v183): one dS fence per step where dK's dS^T comes from registers, against a fence per part.
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
SUSTAIN_S=1.0 timeout 230 python3 packages/flashattn2/benchmarks/scratch/ab_pkg.py 2>&1 | tee "$OUT/ab_fence.log" | grep -v Warning
