#!/usr/bin/env bash
# Session 27, call: host A/B before/after in alternating processes, then the GPU tests on the new code.
cd "$(dirname "$0")/../../../.."
export PYTHONUNBUFFERED=1
timeout 200 python packages/flashattn2/benchmarks/scratch/host_two.py ${ITER:-4} 2>&1 | tee $OUT/host_two.txt
PYTHONPATH=packages/flashattn2/src timeout 280 python -m pytest packages/flashattn2/tests -m gpu -n 4 -q -p no:cacheprovider \
  -o faulthandler_timeout=150 > $OUT/tests.log 2>&1; tail -3 $OUT/tests.log
