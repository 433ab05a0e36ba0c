#!/usr/bin/env bash
# v144: the Hopper backward's consumer step reordered, five alternating rounds (head dim 64).
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src:$PWD/packages/flashattn2/benchmarks/scratch PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
t0=$(date +%s)
timeout 420 python $S/ab_ord.py 2>&1 | tee $OUT/ab_ord.log
echo "total $(( $(date +%s) - t0 )) s"
