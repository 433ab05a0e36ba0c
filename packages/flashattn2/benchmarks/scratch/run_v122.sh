#!/usr/bin/env bash
# scratch (v122): smoke check of the dynamic persistent causal backward, then its A/B against the package
set -o pipefail
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
s=packages/flashattn2/benchmarks/scratch
timeout 120 python $s/ab_dyn.py --smoke 2>&1 | grep -v Warning | tail -8 || exit 1
timeout 420 python $s/ab_dyn.py 2>&1 | grep -v Warning | tail -20
