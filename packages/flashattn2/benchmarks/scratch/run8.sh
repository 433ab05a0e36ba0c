#!/bin/bash
# Session 21, call 8: the persistent full walk's dq epilogue as its programmatic dependent, one-warp programs beside
# it converting each query tile once finished (gb_fepi), against the package (gb_new) and the previous one (gb_head).
cd "$(dirname "$0")"
export PYTHONPATH=$PWD/../../src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
AB_ROUNDS=11 AB_NAME=s21-fepi-d128 AB_D=128 AB_CHECK='[[1,3,3,1000,false],[2,4,2,700,false],[1,2,2,4000,false],[1,2,2,2100,false],[1,4,1,2048,false],[1,3,3,1000,true]]' AB_SHAPES='[[4,16,16,4096,false],[2,32,8,4096,false],[2,16,16,8192,false]]' timeout 240 python ab_bwd.py gb_new gb_fepi 2>&1 | grep -v "Warning\|run_backward" | cut -c1-420
AB_ROUNDS=11 AB_NAME=s21-fepi-d64 AB_D=64 AB_CHECK='[[1,3,3,1000,false],[1,2,2,4000,false]]' AB_SHAPES='[[4,16,16,4096,false],[2,16,16,8192,false]]' timeout 150 python ab_bwd.py gb_new gb_fepi 2>&1 | grep -v "Warning\|run_backward" | cut -c1-420
