#!/usr/bin/env bash
# scratch (v177): three consumers forced below THREE_CONSUMER_THRESHOLDS, then the benchkit model step.
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks PYTHONUNBUFFERED=1
timeout 200 python3 packages/flashattn2/benchmarks/scratch/ab_v177.py 2>&1 | tee "$OUT/ab_v177.log" | grep -v Warning
OUT=$OUT bash packages/flashattn2/benchmarks/gpu_pass.sh model 2>&1 | grep -v Warn | tail -30
