#!/usr/bin/env bash
# scratch: session 33 call 1
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
b=packages/flashattn2/benchmarks
echo "=== fwd27 $(date +%T)"; timeout 260 python $b/scratch/fwd27.py 2>&1 | tail -20
echo "=== must shape, 15 rounds $(date +%T)"
timeout 150 python $b/matrix.py --shapes '[[8,16,16,1024,64,true]]' --rounds 15 --out $OUT/matrix-8-16-1024-64-15rounds.json 2>&1 | tail -4
echo "=== first $(date +%T)"; timeout 150 python $b/matrix.py --first-call --out $OUT/first.json 2>&1 | tail -8
echo "=== done $(date +%T)"
