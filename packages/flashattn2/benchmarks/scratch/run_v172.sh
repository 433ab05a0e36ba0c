#!/usr/bin/env bash
# scratch (v172): causal backwards with dK's dS^T from registers and only K or V held in registers, against the
# package's (v170).
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
AB_VARIANTS="k:gb_c_k v:gb_c_v" AB_CAUSAL_ONLY=1 timeout 330 python3 packages/flashattn2/benchmarks/scratch/ab_rs.py \
  2>&1 | tee "$OUT/ab_rs.log" | grep -v Warning
