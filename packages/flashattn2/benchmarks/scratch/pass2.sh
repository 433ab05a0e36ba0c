#!/bin/bash
# Scratch GPU pass 2 (session 17): the O rescale skipped per warp (vote), exact and with a growth threshold of 8.
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
SH='[[2,5,5,1000,128,true],[1,4,2,777,64,false],[1,16,16,16384,64,true],[4,16,16,4096,64,false],[2,16,16,4096,64,true],[4,16,16,4096,128,false],[4,16,16,4096,128,true],[1,16,16,16384,128,false],[2,32,8,4096,128,true]]'
AB_NAME=v71-rescale-skip AB_SHAPES="$SH" timeout 300 python $S/ab_fwd.py gf_sk0 gf_sk8 2>&1 | tail -12
AB_NAME=v71-rescale-skip-hot AB_QSCALE=4 AB_SHAPES='[[2,5,5,1000,128,true],[4,16,16,4096,128,false],[2,16,16,4096,64,true]]' timeout 150 python $S/ab_fwd.py gf_sk0 gf_sk8 2>&1 | tail -4
