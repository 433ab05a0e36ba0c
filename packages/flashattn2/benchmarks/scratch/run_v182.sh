#!/usr/bin/env bash
# scratch (v182): the head-dim-64 forward with three ring slots against the package's two; then the package's
# side-by-side table (matrix.py, three rounds) and replays at three shapes for BENCHMARKS.md.
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
SUSTAIN_S=1.0 timeout 200 python3 packages/flashattn2/benchmarks/scratch/ab_st3.py 2>&1 | tee "$OUT/ab_st3.log" | grep -v Warning
OUT=$OUT bash packages/flashattn2/benchmarks/gpu_pass.sh matrix 2>&1 | grep -v Warning | tail -20
timeout 120 python3 packages/flashattn2/benchmarks/matrix.py --graph --rounds 5 \
  --shapes '[[1,16,16,16384,64,true],[1,16,16,16384,64,false],[4,16,16,4096,64,false]]' --out "$OUT/graph.json" 2>&1 \
  | grep -v Warning | tail -8
