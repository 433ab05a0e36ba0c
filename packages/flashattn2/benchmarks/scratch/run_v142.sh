#!/usr/bin/env bash
# v142: the head-dim-256 forward stepping over two 64-key ring tiles per 128-key step (gf_half), each K tile
# released once its half of S is done, against the package (one 128-key slot).
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
cd packages/flashattn2/benchmarks/scratch && AB_ROUNDS=5 timeout 250 python ab_p256.py gf_half 2>&1 | tee "$OUT/ab_bar.log" | grep -v "^  " | cut -c1-330
