#!/bin/bash
# Scratch GPU pass 1 (session 20): the D = 128 Hopper backward with 128-query steps taken as two 64-row ring slots,
# one dS buffer and one dQ buffer (gb_q128r), A/B against the package's (gb_head).
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks/scratch PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
python -c "import torch, triton; print(torch.__version__, triton.__version__)"
CHECK='[[1,3,3,1000,true],[1,3,3,1000,false],[2,4,2,700,true],[2,4,2,700,false],[1,2,2,2100,false],[1,4,1,2048,false],[1,2,1,4000,true]]'
AB_NAME=q128 AB_D=128 AB_CHECK=$CHECK AB_SHAPES='[[4,16,16,4096,false],[4,16,16,4096,true],[1,16,16,16384,false],[1,16,16,16384,true],[8,16,16,2048,false],[2,16,4,8192,false],[2,16,4,8192,true]]' \
  timeout 400 python $S/ab_bwd.py gb_q128r 2>&1 | grep -v Warn | tee $OUT/ab128.log | cut -c1-600
