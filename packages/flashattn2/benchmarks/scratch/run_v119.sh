#!/usr/bin/env bash
# scratch (v119): the band A/B, the matrix's replays against cuDNN at band shapes, the GPU tests
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
b=packages/flashattn2/benchmarks
timeout 240 python $b/scratch/pers_band.py 2>&1 | tail -20
timeout 120 python $b/matrix.py --graph --shapes '[[1,16,16,2048,128,true],[1,8,8,4096,128,true],[1,4,4,8192,128,true],[1,8,8,2048,256,true],[1,16,4,2048,128,true]]' --out "$OUT/matrix-band-graph.json" 2>&1 | tail -14
OUT=$OUT bash $b/gpu_pass.sh tests 2>&1 | tail -8
