#!/usr/bin/env bash
# v149 (b): gf3d_pa.py against the package's forward over more head-dim-64 shapes, worker at 144 and 152 registers.
set -o pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
WAYS=thresholds timeout 560 python packages/flashattn2/benchmarks/scratch/ab_pa.py thresholds 2>&1 | tee $OUT/v149-thresholds.log | grep -v "offsets" | tail -20
