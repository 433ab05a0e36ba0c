#!/usr/bin/env bash
# Session 38, call 3: the head-dim-256 forward with its descriptors made afresh each step (gf_zz256), with and
# without per-warp barriers (gf_pwzz256), against the package's and cuDNN's.
set -uo pipefail
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
AB_ROUNDS=7 AB_DIMS=256 AB_MODS=gf_zz256,gf_pwzz256 PYTHONPATH=../../src timeout 400 python ab_pw.py 2>&1 | tail -15 | tee "$OUT/ab_zz256.log"
