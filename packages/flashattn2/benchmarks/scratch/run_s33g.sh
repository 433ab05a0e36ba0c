#!/usr/bin/env bash
# scratch: session 33 call 7: short causal shapes replayed against cuDNN, the must shape in 15 eager rounds, host time
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
b=packages/flashattn2/benchmarks
echo "=== graph $(date +%T)"
timeout 240 python $b/matrix.py --graph --shapes '[[8,16,16,1024,64,true],[4,16,16,1024,64,true],[2,16,16,1024,64,true],[8,16,16,256,128,true],[1,16,16,4096,32,true]]' --out $OUT/graph-short.json 2>&1 | tail -11
echo "=== must shape, 15 rounds $(date +%T)"
timeout 150 python $b/matrix.py --shapes '[[8,16,16,1024,64,true]]' --rounds 15 --out $OUT/matrix-8-16-1024-64-15rounds.json 2>&1 | tail -2
echo "=== host $(date +%T)"; timeout 60 python $b/matrix.py --host --out $OUT/host.json 2>&1 | tail -1
echo "=== done $(date +%T)"
