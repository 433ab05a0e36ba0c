#!/bin/bash
# Scratch GPU pass 2 (session 20): K and V as two 64-key halves whose operand descriptors are computed in the loop
# (gb_kvh: no spills at D = 128, 48-92 bytes in the package's), A/B against the package's (gb_head) at D = 128 and 64.
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks/scratch PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
CHECK='[[1,3,3,1000,true],[1,3,3,1000,false],[2,4,2,700,true],[2,4,2,700,false],[1,2,2,2100,false],[1,4,1,2048,false],[1,2,1,4000,true]]'
AB_NAME=kvh128 AB_D=128 AB_CHECK=$CHECK AB_SHAPES='[[4,16,16,4096,false],[4,16,16,4096,true],[1,16,16,16384,false],[1,16,16,16384,true],[8,16,16,2048,false],[2,16,4,8192,false],[2,16,4,8192,true]]' \
  timeout 250 python $S/ab_bwd.py gb_kvh 2>&1 | grep -v Warn | tee $OUT/ab128.log | cut -c1-300
AB_NAME=kvh64 AB_D=64 AB_CHECK=$CHECK AB_SHAPES='[[1,16,16,16384,true],[4,16,16,4096,false],[4,16,16,4096,true],[8,16,16,2048,true]]' \
  timeout 200 python $S/ab_bwd.py gb_kvh 2>&1 | grep -v Warn | tee $OUT/ab64.log | cut -c1-300
