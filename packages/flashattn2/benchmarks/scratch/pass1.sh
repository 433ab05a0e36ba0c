#!/bin/bash
# Session 15, pass 1: how much of the Hopper kernels' time is L2 traffic (proxies with wrong outputs).
set -x
export PYTHONPATH=$PWD/packages/flashattn2/src
cd packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
AB_NAME=s15-fwd-traffic timeout 280 python ab_fwd.py gf_half gf_noload 2>&1 | grep -v Warning
timeout 250 python ab_graph.py gb_noload gb_nowrite 2>&1 | grep -v Warning
ls $OUT
