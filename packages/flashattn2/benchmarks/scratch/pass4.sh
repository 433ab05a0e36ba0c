#!/bin/bash
# Scratch GPU pass 4 (session 19): at D = 128 the first consumer warpgroup computes the whole dQ tile and the
# second never waits at the dS exchange (gb_asym; gb_asym2 stores the first dQ half before waiting for the second),
# A/B against the package's (gb_head).
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks/scratch PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
AB_NAME=asym128 AB_D=128 AB_SHAPES='[[4,16,16,4096,false],[4,16,16,4096,true],[1,16,16,16384,false],[1,16,16,16384,true],[8,16,16,2048,false],[2,16,4,8192,false],[2,16,4,8192,true]]' \
  timeout 400 python $S/ab_bwd.py gb_asym gb_asym2 2>&1 | grep -v Warn | tee $OUT/ab128.log | cut -c1-700
