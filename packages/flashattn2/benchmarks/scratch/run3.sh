#!/bin/bash
# Session 21, call 3: the TMA-stored dK/dV (gb_t) and with the persistent full walk (gb_pt) against the package, 11 rounds.
cd "$(dirname "$0")"
export PYTHONPATH=$PWD/../../src PYTHONUNBUFFERED=1
AB_ROUNDS=11 AB_CHECK='[]' AB_NAME=s21-rounds-d128 AB_D=128 AB_SHAPES='[[4,16,16,4096,false],[4,16,16,4096,true],[2,16,16,8192,true]]' timeout 280 python ab_bwd.py gb_t gb_pt 2>&1 | grep -v "Warning\|run_backward"
AB_ROUNDS=11 AB_CHECK='[]' AB_NAME=s21-rounds-d64 AB_D=64 AB_SHAPES='[[1,16,16,16384,true],[4,16,16,4096,false],[4,16,16,4096,true]]' timeout 280 python ab_bwd.py gb_t gb_pt 2>&1 | grep -v "Warning\|run_backward"
