#!/usr/bin/env bash
# scratch: session 33 call 3
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
b=packages/flashattn2/benchmarks
echo "=== forward order A/B $(date +%T)"; timeout 300 bash $b/scratch/fwd_order_ab.sh
echo "=== first $(date +%T)"; timeout 150 python $b/matrix.py --first-call --out $OUT/first.json 2>&1 | tail -7
echo "=== done $(date +%T)"
