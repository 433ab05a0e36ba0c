#!/bin/bash
# Session 21, call 2: persistent non-causal walk (gb_pers), + dK/dV by TMA through K/V smem (gb_pt), the TMA store alone (gb_t).
cd "$(dirname "$0")"
export PYTHONPATH=$PWD/../../src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
AB_NAME=s21-d128 AB_D=128 AB_SHAPES='[[4,16,16,4096,false],[4,16,16,4096,true],[2,16,16,8192,false],[2,32,8,4096,false]]' timeout 330 python ab_bwd.py gb_pers gb_pt gb_t 2>&1 | grep -v Warning
AB_NAME=s21-d64 AB_D=64 AB_CHECK='[[1,3,3,1000,true],[1,3,3,1000,false],[2,4,2,700,false],[1,2,2,4000,false],[1,4,1,2048,false]]' AB_SHAPES='[[4,16,16,4096,false],[1,16,16,16384,true],[4,16,16,4096,true]]' timeout 230 python ab_bwd.py gb_pers gb_pt gb_t 2>&1 | grep -v Warning
cp ab-bwd-*.json $OUT/ 2>/dev/null; ls $OUT
