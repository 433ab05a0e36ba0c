#!/bin/bash
# Session 16, pass 9: a D = 256 Hopper forward (64-key tiles; the wait after P V that lets ptxas keep the products
# asynchronous).
set -x
export PYTHONPATH=$PWD/packages/flashattn2/src
cd packages/flashattn2/benchmarks/scratch
timeout 400 python ab_d256.py 2>&1 | grep -v Warning
ls $OUT
