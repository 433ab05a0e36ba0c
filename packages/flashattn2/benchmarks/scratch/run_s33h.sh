#!/usr/bin/env bash
# scratch: session 33 last call: GPU tests and replays at the final code
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
b=packages/flashattn2/benchmarks
echo "=== graph $(date +%T)"
timeout 120 python $b/matrix.py --graph --shapes '[[8,16,16,1024,128,true],[16,16,16,512,128,true],[12,16,16,1024,64,true]]' --out $OUT/graph-beyond-l2.json 2>&1 | tail -7
echo "=== tests $(date +%T)"; OUT=$OUT timeout 250 bash $b/gpu_pass.sh tests 2>&1 | tail -3
echo "=== done $(date +%T)"
