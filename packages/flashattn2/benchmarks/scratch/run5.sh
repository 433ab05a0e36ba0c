#!/bin/bash
# Session 21, call 5: matrix.py on the package (persistent full walks, dK/dV by TMA), then the causal shapes'
# backward against the previous package's once more (11 rounds).
cd "$(dirname "$0")"
export PYTHONPATH=$PWD/../../src PYTHONUNBUFFERED=1
(cd ../../../.. && timeout 330 python packages/flashattn2/benchmarks/matrix.py --out $OUT/matrix.json 2>&1 | grep -v Warning | tail -30)
AB_ROUNDS=11 AB_CHECK='[]' AB_NAME=s21-package-causal-d128 AB_D=128 AB_SHAPES='[[2,32,8,4096,true],[4,16,16,4096,true],[4,16,16,4096,false]]' timeout 150 python ab_bwd.py gb_new 2>&1 | grep -v "Warning\|run_backward" | cut -c1-300
