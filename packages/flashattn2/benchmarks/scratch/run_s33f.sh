#!/usr/bin/env bash
# scratch: session 33 call 6: the GPU tests and the side-by-side table at the final code
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
b=packages/flashattn2/benchmarks
echo "=== tests $(date +%T)"; OUT=$OUT timeout 250 bash $b/gpu_pass.sh tests 2>&1 | tail -3
echo "=== matrix $(date +%T)"; timeout 320 python $b/matrix.py --out $OUT/matrix.json 2>&1 | tail -16
echo "=== done $(date +%T)"
