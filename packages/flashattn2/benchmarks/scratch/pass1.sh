#!/bin/bash
# Scratch GPU pass 1 (session 19): the Hopper backward whose full walks finish each query tile's dQ in the last
# turn's consumers (gb_fin: no epilogue kernel), A/B against the package's (gb_head), at D = 128 and 64.
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks/scratch PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
python -c "import torch, triton; print(torch.__version__, triton.__version__)"
AB_NAME=fin128 AB_D=128 AB_SHAPES='[[4,16,16,4096,false],[1,16,16,16384,false],[8,16,16,2048,false],[2,16,4,8192,false],[4,16,16,4096,true]]' \
  timeout 280 python $S/ab_bwd.py gb_fin 2>&1 | tee $OUT/ab128.log | cut -c1-600
AB_NAME=fin64 AB_D=64 AB_SHAPES='[[4,16,16,4096,false],[1,16,16,16384,false],[2,16,4,8192,false],[1,16,16,16384,true]]' \
  timeout 250 python $S/ab_bwd.py gb_fin 2>&1 | tee $OUT/ab64.log | cut -c1-600
