#!/usr/bin/env bash
# Session 38, call 1: the GPU tests at HEAD, then the per-warp barrier A/B of the head-dim-128 and 256 forwards.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
OUT=$OUT bash packages/flashattn2/benchmarks/gpu_pass.sh tests
cd packages/flashattn2/benchmarks/scratch
PYTHONPATH=../../src timeout 330 python ab_pw.py 2>&1 | tail -40 | tee "$OUT/ab_pw.log"
