#!/usr/bin/env bash
# v149: per-warp mbarrier arrives/waits in the head-dim-64 Hopper forward (ab_pa.py): checks, then timing.
set -o pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
S=packages/flashattn2/benchmarks/scratch
timeout 240 python -X faulthandler $S/ab_pa.py check 2>&1 | tee $OUT/v149-check.log | grep -v "^ " | tail -20
timeout 300 python $S/ab_pa.py bench 2>&1 | tee $OUT/v149-bench.log | grep -v "^ " | tail -20
