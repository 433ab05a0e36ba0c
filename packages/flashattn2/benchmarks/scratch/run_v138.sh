#!/usr/bin/env bash
# v138: the head-dim-256 forward with 128-key tiles and P through shared memory (gf_p256: consumers 240/240
# registers, loader 24; gf_p256b: 232/48), against the package's forward and cuDNN's.
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
cd packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" | tee -a "$OUT/gpu.txt"
timeout 400 python ab_p256.py gf_p256 gf_p256b 2>&1 | tee "$OUT/ab_p256.log" | grep -v "^  "
