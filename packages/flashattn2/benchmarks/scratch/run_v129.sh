#!/usr/bin/env bash
# v129: GPU tests at HEAD, then the three-consumer forward against the package's.
set -o pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
if [ "${TESTS:-1}" = 1 ]; then
  OUT=$OUT timeout 300 bash packages/flashattn2/benchmarks/gpu_pass.sh tests 2>&1 | tail -5
fi
timeout 400 python packages/flashattn2/benchmarks/scratch/ab_gf3d.py 2>&1 | tee $OUT/v129b.log | grep -v "^ " | tail -40
