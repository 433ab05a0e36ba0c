#!/bin/bash
# Scratch GPU pass 4 (session 17): FA3's intra-warpgroup order with K and V released separately (2 and 3 slots).
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
SH='[[2,5,5,1000,128,true],[1,4,2,777,64,false],[1,16,16,16384,64,true],[4,16,16,4096,64,false],[2,16,16,4096,64,true],[4,16,16,4096,128,false],[4,16,16,4096,128,true],[1,16,16,16384,128,false],[2,32,8,4096,128,true],[8,16,16,1024,128,true]]'
AB_NAME=v72-intra-warpgroup-overlap AB_SHAPES="$SH" timeout 400 python $S/ab_fwd.py gf_ov2 gf_ov3 2>&1 | tail -12
