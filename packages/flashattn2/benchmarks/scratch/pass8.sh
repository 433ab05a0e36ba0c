#!/bin/bash
# Session 16, pass 8 (package at c771e90): CUDA-graph replays of two shapes; benchkit's medium model step twice
# (its attention, (4, 16, 4096, 64) causal, now runs the Hopper forward).
set -x
export PYTHONPATH=$PWD/packages/flashattn2/src
timeout 150 python packages/flashattn2/benchmarks/matrix.py --graph --shapes '[[8,16,16,1024,64,true],[1,16,16,16384,64,true]]' --out $OUT/graph.json 2>&1 | grep -v Warning
for run in a b; do OUT=$OUT/$run timeout 200 bash packages/flashattn2/benchmarks/gpu_pass.sh model 2>&1 | grep -E "step|ms|median|Error|error" | tail -8; done
ls -R $OUT | head -30
