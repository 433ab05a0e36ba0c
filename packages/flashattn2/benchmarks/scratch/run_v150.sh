#!/usr/bin/env bash
# v150: the GPU tests with the three-consumer forward, then its A/B against the forward before it.
set -o pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
OUT=$OUT timeout 300 bash packages/flashattn2/benchmarks/gpu_pass.sh tests 2>&1 | tail -8
grep -E "FAIL|Error" $OUT/tests.log | head -20
timeout 280 python packages/flashattn2/benchmarks/scratch/ab_three.py 2>&1 | tee $OUT/v150-ab.log | tail -14
