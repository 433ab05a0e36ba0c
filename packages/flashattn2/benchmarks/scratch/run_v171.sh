#!/usr/bin/env bash
# scratch (v171): the Q-from-registers forward against the package's; then the package (with v170's backward)
# against cuDNN at the headline and three more shapes (matrix.py --graph).
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" | tee -a "$OUT/gpu.txt"
timeout 300 python3 packages/flashattn2/benchmarks/scratch/ab_qr.py 2>&1 | tee "$OUT/ab_qr.log" | grep -v Warning
timeout 240 python3 packages/flashattn2/benchmarks/matrix.py --graph --rounds 5 \
  --shapes '[[1,16,16,16384,64,true],[1,16,16,16384,64,false],[4,16,16,4096,64,true],[2,32,8,4096,128,true]]' \
  --out "$OUT/matrix.json" 2>&1 | grep -v Warning | tail -30
