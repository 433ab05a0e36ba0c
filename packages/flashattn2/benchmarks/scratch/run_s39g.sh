#!/usr/bin/env bash
# session 39, call 8 (H200): the three-consumer forward with one exponential in 2, 4 or 8 by a polynomial on the FMA
# pipe (gf_exN.py from make_ex.py), against the package.
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1 VARIANTS=ex2:gf_ex2,ex4:gf_ex4,ex8:gf_ex8 NAME=s39-ex2-poly
timeout 480 python packages/flashattn2/benchmarks/scratch/ab_s39.py 2>&1 | grep -v Warning | tail -12
