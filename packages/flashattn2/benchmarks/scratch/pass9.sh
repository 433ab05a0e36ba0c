#!/bin/bash
# Scratch GPU pass 9 (session 19): proxies of the D = 128 Hopper backward (outputs wrong, diagnostics only):
# without the dS exchange wait (gb_px_noexch), without the dQ product (zeros handed over, gb_px_nodq), without both.
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks/scratch PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
AB_NAME=px128 AB_D=128 AB_CHECK='[]' AB_SHAPES='[[4,16,16,4096,false],[4,16,16,4096,true],[1,16,16,16384,false],[8,16,16,2048,false]]' \
  timeout 300 python $S/ab_bwd.py gb_px_noexch gb_px_nodq gb_px_neither 2>&1 | grep -v Warn | tee $OUT/ab128.log | cut -c1-600
