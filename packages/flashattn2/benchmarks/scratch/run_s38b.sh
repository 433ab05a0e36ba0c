#!/usr/bin/env bash
# Session 38, call 2: the backward's per-warp barriers A/B; the head-dim-128 forward's again with seven rounds.
set -uo pipefail
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
PYTHONPATH=../../src timeout 330 python ab_bwd.py 2>&1 | tee "$OUT/ab_bwd.log" | tail -15
AB_ROUNDS=7 AB_DIMS=128 PYTHONPATH=../../src timeout 200 python ab_pw.py 2>&1 | tail -15 | tee "$OUT/ab_pw128.log"
