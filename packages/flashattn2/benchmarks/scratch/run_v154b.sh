#!/usr/bin/env bash
# scratch (v154): the GPU tests, then ab_rows.py
OUT=$OUT bash packages/flashattn2/benchmarks/gpu_pass.sh tests
PYTHONPATH=packages/flashattn2/src timeout 300 python packages/flashattn2/benchmarks/scratch/ab_rows.py 2>&1 | grep -v Warning | tail -30
