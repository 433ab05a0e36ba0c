#!/usr/bin/env bash
# v141: the head-dim-256 forward's K slot released after the P store's warpgroup barrier instead of after the S
# wait (one warpgroup barrier fewer per step; gf_bar), against the package's.
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
cd packages/flashattn2/benchmarks/scratch && AB_ROUNDS=5 timeout 250 python ab_p256.py gf_bar 2>&1 | tee "$OUT/ab_bar.log" | grep -v "^  " | cut -c1-330
