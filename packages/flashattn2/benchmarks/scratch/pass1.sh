#!/bin/bash
# Scratch GPU pass 1 (session 18): the D = 128 Hopper backward with the next step's S^T issued before this step's
# dQ wait (gb_rot1), A/B against the package's (gb_head).
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
python -c "import torch, triton; print(torch.__version__, triton.__version__)"
AB_NAME=rot1 AB_SHAPES='[[4,16,16,4096,false],[4,16,16,4096,true],[1,16,16,16384,false],[1,16,16,16384,true],[8,16,16,2048,false],[2,16,4,8192,false],[2,16,4,8192,true]]' \
  timeout 400 python $S/ab_bwd.py gb_rot1 2>&1 | tee $OUT/ab.log | cut -c1-400
