#!/bin/bash
# Scratch GPU pass 6 (session 19): the dQ writers poll their query tile's counter with acquire loads instead of
# acquire atomics, and not at all on turn 0 (gb_poll0: back to back; gb_poll200: 200 ns apart), A/B against gb_head.
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks/scratch PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
CHECK='[[1,3,3,1000,true],[1,3,3,1000,false],[2,4,2,700,true],[2,4,2,700,false],[1,2,2,2100,false],[1,4,1,2048,false],[1,2,1,4000,true]]'
AB_NAME=poll128 AB_D=128 AB_CHECK=$CHECK AB_SHAPES='[[4,16,16,4096,false],[4,16,16,4096,true],[1,16,16,16384,false]]' \
  timeout 250 python $S/ab_bwd.py gb_poll0 gb_poll200 2>&1 | grep -v Warn | tee $OUT/ab128.log | cut -c1-420
AB_NAME=poll64 AB_D=64 AB_CHECK=$CHECK AB_SHAPES='[[1,16,16,16384,true],[4,16,16,4096,false],[4,16,16,4096,true]]' \
  timeout 250 python $S/ab_bwd.py gb_poll0 gb_poll200 2>&1 | grep -v Warn | tee $OUT/ab64.log | cut -c1-420
