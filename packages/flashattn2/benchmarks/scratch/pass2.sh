#!/bin/bash
# Scratch GPU pass 2 (session 18): the D = 64 Hopper backward with the next step's first S^T (a: and dP^T) issued
# before this step's dQ wait (gb_rot64a, gb_rot64b), A/B against the package's (gb_head).
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
AB_D=64 AB_NAME=rot64 AB_SHAPES='[[1,16,16,16384,true],[1,16,16,16384,false],[4,16,16,4096,true],[4,16,16,4096,false],[8,16,16,2048,true],[2,16,4,8192,true],[2,16,4,8192,false]]' \
  timeout 400 python $S/ab_bwd.py gb_rot64a gb_rot64b 2>&1 | tee $OUT/ab.log | grep -v Warn | cut -c1-420
