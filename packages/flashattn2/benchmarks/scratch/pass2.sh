#!/bin/bash
# Session 16, pass 2: the Hopper forward's row sums by the tensor cores (P times a ones tile, gf_lsum).
set -x
export PYTHONPATH=$PWD/packages/flashattn2/src
cd packages/flashattn2/benchmarks/scratch
AB_NAME=s16-v66-lsum timeout 300 python ab_lazy.py gf_lsum 2>&1 | grep -v Warning
ls $OUT
