#!/bin/bash
# Session 16, pass 3: row sums by the tensor cores at more D = 64 shapes, and with P V issued first (gf_lsum_pv).
set -x
export PYTHONPATH=$PWD/packages/flashattn2/src
cd packages/flashattn2/benchmarks/scratch
AB_NAME=s16-v66-lsum-2 AB_SHAPES='[[1,16,16,16384,64,true],[2,16,16,4096,64,true],[1,16,16,8192,64,true],[1,8,8,16384,64,true],[4,16,16,4096,64,true],[8,16,16,2048,64,true],[4,16,16,4096,64,false],[1,16,16,16384,64,false],[2,32,8,4096,64,true],[4,16,16,4096,128,false],[4,16,16,4096,128,true]]' timeout 400 python ab_lazy.py gf_lsum gf_lsum_pv 2>&1 | grep -v Warning
ls $OUT
