#!/usr/bin/env bash
# session 39, call 6 (H200): rs_overlap.py, SS and RS products beside another warpgroup's exponentials.
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
timeout 300 python packages/flashattn2/benchmarks/scratch/rs_overlap.py 2>&1 | tail -25
