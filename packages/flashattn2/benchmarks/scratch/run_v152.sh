#!/usr/bin/env bash
# v152: the partitions in one order for both layouts (the last consumer the default partition): GPU tests, then the
# forward against 90d52ec's (ab_three.py).
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
OUT=$OUT timeout 240 bash packages/flashattn2/benchmarks/gpu_pass.sh tests 2>&1 | tail -3
grep -E "FAILED|ERROR" $OUT/tests.log | head -10
timeout 250 python packages/flashattn2/benchmarks/scratch/ab_three.py 2>&1 | tee $OUT/v152-ab.log | tail -11
