#!/usr/bin/env bash
# session 39, call 7 (H200): the three-consumer forward with two softmax turns in flight (gf_ring.py) against the
# package: a smoke run under a short limit (a wrong turn protocol would hang), then the A/B.
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1 VARIANTS=ring:gf_ring NAME=s39-ring
S=packages/flashattn2/benchmarks/scratch
SMOKE=1 timeout 90 python $S/ab_s39.py 2>&1 | grep -v Warning | tail -5
[ ${PIPESTATUS[0]} -eq 0 ] || { echo "smoke failed or hung"; exit 1; }
timeout 400 python $S/ab_s39.py 2>&1 | grep -v Warning | tail -12
