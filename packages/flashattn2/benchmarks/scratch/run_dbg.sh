#!/usr/bin/env bash
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch/dbg_fpeel.py
for w in pkg peel; do for c in causal full; do timeout 60 python3 $S $w 1,4,6144,64 $c 2>&1 | grep -v Warn | tail -2; done; done
which compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null
CS=$(which compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
[ -n "$CS" ] && timeout 200 $CS --print-limit 5 python3 $S peel 1,4,6144,64 causal 2>&1 | grep -v Warn | head -40
