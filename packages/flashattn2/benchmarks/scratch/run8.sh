#!/bin/bash
# session 22, call 8: the causal forward persistent at head dim 64 too (gf_c64: the causal mask written as
# keys - rows <= 0, with which ptxas no longer serializes the persistent kernel's products) against the package's
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
cd packages/flashattn2/benchmarks/scratch
AB_ROUNDS=7 AB_NAME=2026-11-27-h100-s22-v94-persistent-causal-forward-d64 AB_SHAPES='[[2,5,5,1000,64,true],[3,4,2,4500,64,true],[1,16,16,16384,64,true],[2,16,16,4096,64,true],[4,16,16,4096,64,true],[2,16,16,8192,64,true],[4,16,16,16384,64,true],[4,16,16,4096,128,true],[2,16,16,4096,256,true]]' timeout 300 python ab_fwd.py gf_c64 2>&1 | grep -v Warning | tail -9
