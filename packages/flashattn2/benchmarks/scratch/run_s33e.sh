#!/usr/bin/env bash
# scratch: session 33 call 5
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
b=packages/flashattn2/benchmarks
echo "=== backward order A/B $(date +%T)"; timeout 330 python $b/scratch/bwd_group_ab.py 2>&1 | tail -16
echo "=== tests $(date +%T)"; OUT=$OUT timeout 250 bash $b/gpu_pass.sh tests 2>&1 | tail -4
echo "=== done $(date +%T)"
