#!/usr/bin/env bash
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
B=packages/flashattn2/benchmarks
echo "=== fwd $(date +%T)"
timeout 300 python $B/scratch/fwd_bench.py 2>&1 | tail -30
echo "=== neg-scale on HEAD's kernel $(date +%T)"
timeout 100 python $B/scratch/neg_scale_head.py 2>&1 | tail -5
echo "=== end $(date +%T)"
