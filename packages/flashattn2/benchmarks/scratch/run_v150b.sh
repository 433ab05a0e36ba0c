#!/usr/bin/env bash
# v150 (b): the GPU tests, then the side-by-side table.
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
git log --oneline -1 | tee $OUT/commit.txt
OUT=$OUT timeout 300 bash packages/flashattn2/benchmarks/gpu_pass.sh tests 2>&1 | tail -4
grep -E "FAILED|ERROR" $OUT/tests.log | head -10
OUT=$OUT timeout 300 bash packages/flashattn2/benchmarks/gpu_pass.sh matrix 2>&1 | grep -v "^ " | tail -40
