#!/bin/bash
# Session 20's offline ptxas table: each variant compiled for sm_90a without a GPU (Triton 3.6 venv at /tmp/tv).
cd "$(dirname "$0")"
export PYTHONPATH=../../src
row() { echo -n "$1 $2 $3 ${4:-}: "; env $4 /tmp/tv/bin/python aot_bwd.py $1 $2 $3 2>&1 | grep -v "^  " | tail -1 | grep -o "C75[0-9]*\|[0-9]* bytes spill stores\|Error.*\|must be a power of 2" | tr '\n' ' '; echo; }
for c in 0 1; do row gb_head $c 128; done
for cfg in "RC=192 RDQ=104" "RC=200 RDQ=88" "RC=176 RDQ=136" "RC=240 RDQ=104"; do row gb_dqwg 0 128 "$cfg"; done
for cfg in "RC=200 RDQ=88" "RC=232 RDQ=24"; do row gb_dqB 0 128 "$cfg"; done
row gb_idle 0 128
row gb_w80 0 128
for m in gb_q128 gb_q128o gb_q128r; do for c in 0 1; do row $m $c 128; done; done
for c in 0 1; do for d in 128 64; do row gb_kvh $c $d; done; done
for cfg in "RC=200 RDQ=88" "RC=208 RDQ=72" "RC=216 RDQ=56"; do row gb_kdq 0 128 "$cfg"; done
