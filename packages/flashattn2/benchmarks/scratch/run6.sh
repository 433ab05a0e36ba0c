#!/bin/bash
# session 22, call 6: the causal forward persistent at head dim 128 with its items assigned on the host (gf_lpt:
# longest-processing-time in the one-item launch order) against the package's (gf_head)
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
cd packages/flashattn2/benchmarks/scratch
AB_ROUNDS=7 AB_NAME=2026-11-27-h100-s22-v93-persistent-causal-forward-lpt AB_SHAPES='[[2,5,5,1000,128,true],[3,4,2,2200,128,true],[4,16,16,4096,128,true],[2,32,8,4096,128,true],[8,16,16,2048,128,true],[1,16,16,16384,128,true],[2,16,16,8192,128,true],[8,16,16,1024,128,true],[4,16,16,4096,128,false]]' timeout 300 python ab_fwd.py gf_lpt 2>&1 | grep -v Warning | tail -9
