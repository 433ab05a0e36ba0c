#!/bin/bash
# Scratch GPU pass 5 (session 17): the package's forward with the overlap at head dim 128 (gf_new) against the
# previous one (gf_head), then the GPU tests.
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
SH='[[2,5,5,1000,128,true],[1,4,2,777,64,false],[1,16,16,16384,64,true],[4,16,16,4096,64,false],[2,16,16,4096,64,true],[4,16,16,4096,128,false],[4,16,16,4096,128,true],[2,32,8,4096,128,true],[8,16,16,1024,128,true],[2,16,16,4096,256,true],[4,16,16,2048,256,false],[1,3,3,1000,256,true]]'
AB_NAME=v72-package AB_SHAPES="$SH" timeout 300 python $S/ab_fwd.py gf_new 2>&1 | tail -12
OUT=$OUT timeout 250 bash packages/flashattn2/benchmarks/gpu_pass.sh tests 2>&1 | tail -5
