#!/usr/bin/env bash
# scratch (v178): the three-consumer forward two steps per iteration against the package's.
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks PYTHONUNBUFFERED=1
SUSTAIN_S=1.0 timeout 230 python3 packages/flashattn2/benchmarks/scratch/ab_u2.py 2>&1 | tee "$OUT/ab_u2.log" | grep -v Warning
