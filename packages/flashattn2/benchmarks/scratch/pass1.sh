#!/bin/bash
# Session 16, pass 1: the Hopper forward's conditional rescale (gf_lazy, threshold 2^8; gf_lazy0 threshold 1).
set -x
export PYTHONPATH=$PWD/packages/flashattn2/src
cd packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
AB_NAME=s16-v65-lazy timeout 300 python ab_lazy.py gf_lazy gf_lazy0 2>&1 | grep -v Warning
AB_NAME=s16-v65-lazy-hot AB_QSCALE=4 AB_SHAPES='[[4,16,16,4096,128,false],[1,16,16,16384,64,true],[2,5,5,1000,128,true]]' timeout 150 python ab_lazy.py gf_lazy 2>&1 | grep -v Warning
ls $OUT
