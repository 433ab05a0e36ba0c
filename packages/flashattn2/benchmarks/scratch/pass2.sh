#!/bin/bash
# Scratch GPU pass 2 (session 19): gb_fin against gb_head (see pass1.sh) at in-domain shapes; then the n = 130
# D = 128 full walk that raised an illegal instruction in pass 1, each module alone in its own process.
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks/scratch PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
AB_NAME=fin128 AB_D=128 AB_SHAPES='[[4,16,16,4096,false],[1,16,16,16384,false],[8,16,16,2048,false],[2,16,4,8192,false],[4,16,16,4096,true]]' \
  timeout 250 python $S/ab_bwd.py gb_fin 2>&1 | tee $OUT/ab128.log | cut -c1-600
AB_NAME=fin64 AB_D=64 AB_SHAPES='[[4,16,16,4096,false],[1,16,16,16384,false],[2,16,4,8192,false],[1,16,16,16384,true]]' \
  timeout 200 python $S/ab_bwd.py gb_fin 2>&1 | tee $OUT/ab64.log | cut -c1-600
for m in gb_head gb_fin; do
  AB_NAME=small-$m AB_D=128 AB_CHECK='[[2,2,2,130,false]]' AB_SHAPES='[]' timeout 60 python -c "
import sys; sys.argv=['ab_bwd.py']
import gb_head, importlib; m=importlib.import_module('$m'); sys.modules['gb_head']=m
exec(open('$S/ab_bwd.py').read())" 2>&1 | tail -3 | cut -c1-300
done
