#!/bin/bash
# Scratch GPU pass 5 (session 19): at D = 128 the consumer warpgroups take turns (by step parity) computing the
# whole dQ tile, the other going on without waiting at the dS exchange (gb_alt), A/B against the package's (gb_head).
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks/scratch PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
AB_NAME=alt128 AB_D=128 AB_CHECK='[[1,3,3,1000,true],[1,3,3,1000,false],[2,4,2,700,true],[1,2,2,2100,false],[1,4,1,2048,false]]' \
  AB_SHAPES='[[4,16,16,4096,false],[4,16,16,4096,true],[1,16,16,16384,false],[1,16,16,16384,true],[8,16,16,2048,false]]' \
  timeout 300 python $S/ab_bwd.py gb_alt 2>&1 | grep -v Warn | tee $OUT/ab128.log | cut -c1-500
