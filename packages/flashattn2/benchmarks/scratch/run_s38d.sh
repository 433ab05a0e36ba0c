#!/usr/bin/env bash
# Session 38, call 4: the package's head-dim-256 forward with Q, K and V addressed afresh in each step against the
# one before (gf_old.py, df80b56's) and cuDNN; the GPU tests; the whole matrix.
set -uo pipefail
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
AB_ROUNDS=7 AB_DIMS=256 AB_MODS=gf_old PYTHONPATH=../../src timeout 200 python ab_pw.py 2>&1 | tail -8 | tee "$OUT/ab_old256.log"
cd ../../../..
OUT=$OUT bash packages/flashattn2/benchmarks/gpu_pass.sh tests matrix
