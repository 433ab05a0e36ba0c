#!/bin/bash
# Session 16, pass 6: the D = 128 non-causal Hopper forward with 192-key steps (a 128-key and a 64-key product).
set -x
export PYTHONPATH=$PWD/packages/flashattn2/src
cd packages/flashattn2/benchmarks/scratch
AB_NAME=s16-v68-192 AB_SHAPES='[[2,5,5,1000,128,false],[4,16,16,4096,128,false],[1,16,16,16384,128,false],[8,16,16,2048,128,false],[2,32,8,4096,128,false],[1,4,4,4000,128,false]]' timeout 300 python ab_fwd.py gf_192 2>&1 | grep -v Warning
ls $OUT
