#!/usr/bin/env bash
# scratch: session 33 call 2
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
b=packages/flashattn2/benchmarks
echo "=== fp32 first-call A/B $(date +%T)"; timeout 200 bash $b/scratch/first_fp32_ab.sh
echo "=== first $(date +%T)"; timeout 120 python $b/matrix.py --first-call --out $OUT/first.json 2>&1 | tail -6
echo "=== tests $(date +%T)"; OUT=$OUT timeout 320 bash $b/gpu_pass.sh tests 2>&1 | tail -8
echo "=== done $(date +%T)"
