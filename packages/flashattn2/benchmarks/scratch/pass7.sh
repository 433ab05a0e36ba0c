#!/bin/bash
# Session 16, pass 7: 192- and 160-key steps again, with a wait between the two P V products (ptxas serialized
# every product of pass 6's kernel, C7512); w: S and the second S in turn, wc: both at once.
set -x
export PYTHONPATH=$PWD/packages/flashattn2/src
cd packages/flashattn2/benchmarks/scratch
AB_NAME=s16-v68-192-wait AB_SHAPES='[[2,5,5,1000,128,false],[4,16,16,4096,128,false],[1,16,16,16384,128,false],[2,32,8,4096,128,false],[1,4,4,4000,128,false]]' timeout 400 python ab_fwd.py gf_192w gf_192wc gf_160w gf_160wc 2>&1 | grep -v Warning
ls $OUT
