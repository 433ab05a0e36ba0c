#!/usr/bin/env bash
# session 39, call 5 (H200): the three-consumer forward's row sums by FADD and row maximum as a tree, against the package.
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
timeout 500 python packages/flashattn2/benchmarks/scratch/ab_s39.py 2>&1 | grep -v Warning | tail -20
