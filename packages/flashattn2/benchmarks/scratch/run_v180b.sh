#!/usr/bin/env bash
# scratch (v180): the package with the diagonal step compiled apart: GPU tests, backward A/B against fe94ac9's,
# forward+backward against cuDNN (replays) at the headline and (4, 16, 4096, 128) causal.
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
OUT=$OUT bash packages/flashattn2/benchmarks/gpu_pass.sh tests
timeout 200 python3 packages/flashattn2/benchmarks/scratch/ab_pkg.py 2>&1 | tee "$OUT/ab_pkg.log" | grep -v Warning
timeout 150 python3 packages/flashattn2/benchmarks/matrix.py --graph --rounds 5 \
  --shapes '[[1,16,16,16384,64,true],[4,16,16,4096,128,true]]' --out "$OUT/matrix_graph.json" 2>&1 | grep -v Warning | tail -12
