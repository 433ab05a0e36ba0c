#!/bin/bash
# Scratch GPU pass 1 (session 17): exponentials partly by polynomial in the Hopper forward, A/B against the package's.
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
python -c "import torch, triton; print(torch.__version__, triton.__version__)"
AB_NAME=v70-ex2-poly AB_SHAPES='[[2,5,5,1000,128,true],[1,4,2,777,64,false],[1,16,16,16384,64,true],[4,16,16,4096,64,false],[2,16,16,4096,64,true],[4,16,16,4096,128,false],[4,16,16,4096,128,true],[1,16,16,16384,128,false]]' \
  timeout 420 python $S/ab_fwd.py gf_ex2 gf_ex4 gf_ex8 gf_ex16 2>&1 | tail -12
