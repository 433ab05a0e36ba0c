#!/bin/bash
# session 22, call 3: where the persistent non-causal forward beats the Triton forward (thresholds), and the causal
# forward persistent at head dim 128 (gf_pc: a snake over the one-item programs' launch order) against the package
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
cd packages/flashattn2/benchmarks/scratch
timeout 200 python thresholds.py 2>&1 | grep -v Warn | tail -10
cp gf_pkg.py gf_head.py
AB_ROUNDS=7 AB_NAME=2026-11-27-h100-s22-v91-persistent-causal-forward-d128 AB_SHAPES='[[2,5,5,1000,128,true],[3,4,2,2200,128,true],[4,16,16,4096,128,true],[2,32,8,4096,128,true],[8,16,16,2048,128,true],[1,16,16,16384,128,true],[8,16,16,1024,128,true],[4,16,16,4096,128,false]]' timeout 250 python ab_fwd.py gf_pc 2>&1 | grep -v Warning | tail -8
