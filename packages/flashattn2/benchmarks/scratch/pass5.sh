#!/bin/bash
# Session 16, pass 5: the Triton forward's row sums by the tensor cores (tf_lsum); the Hopper forward at
# (8, 16, 1024, 128) again.
set -x
export PYTHONPATH=$PWD/packages/flashattn2/src
cd packages/flashattn2/benchmarks/scratch
AB_NAME=s16-v67-triton-lsum timeout 400 python ab_tfwd.py tf_lsum 2>&1 | grep -v Warning
ls $OUT
