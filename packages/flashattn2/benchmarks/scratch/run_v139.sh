#!/usr/bin/env bash
# v139: the head-dim-256 forward's P V left in flight into the next step (gf_fly; gf_fly2 also stores P before
# rescaling O), against the package's; then the side-by-side matrix at HEAD.
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
(cd packages/flashattn2/benchmarks/scratch && AB_ROUNDS=5 timeout 220 python ab_p256.py gf_fly gf_fly2 2>&1 | tee "$OUT/ab_fly.log" | grep -v "^  " | cut -c1-400)
timeout 330 python packages/flashattn2/benchmarks/matrix.py --out "$OUT/matrix.json" 2>&1 | tail -22
