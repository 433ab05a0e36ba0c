#!/usr/bin/env bash
# scratch (v180): the head-dim-64 causal backward with its diagonal step peeled off, against the package's.
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 500 python3 packages/flashattn2/benchmarks/scratch/ab_peel.py 2>&1 | tee "$OUT/ab_peel.log" | grep -v Warning
