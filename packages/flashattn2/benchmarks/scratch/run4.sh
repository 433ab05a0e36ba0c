#!/bin/bash
# Session 21, call 4: the GPU tests on the package (persistent full walks, dK/dV by TMA), then the package's backward
# (gb_new, a copy) against the previous one (gb_head), 11 alternating rounds.
cd "$(dirname "$0")"
export PYTHONPATH=$PWD/../../src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
(cd ../../../.. && timeout 260 python -m pytest packages/flashattn2/tests -m gpu -n 4 -q -p no:cacheprovider 2>&1 | tee $OUT/gpu-tests.log | tail -6)
AB_ROUNDS=11 AB_NAME=s21-package-d128 AB_D=128 AB_SHAPES='[[4,16,16,4096,false],[4,16,16,4096,true],[2,32,8,4096,true],[2,32,8,4096,false]]' timeout 200 python ab_bwd.py gb_new 2>&1 | grep -v "Warning\|run_backward" | cut -c1-600
AB_ROUNDS=11 AB_NAME=s21-package-d64 AB_D=64 AB_CHECK='[[1,3,3,1000,true],[1,3,3,1000,false],[2,4,2,700,false],[1,2,2,4000,false]]' AB_SHAPES='[[1,16,16,16384,true],[4,16,16,4096,false],[4,16,16,4096,true]]' timeout 120 python ab_bwd.py gb_new 2>&1 | grep -v "Warning\|run_backward" | cut -c1-600
