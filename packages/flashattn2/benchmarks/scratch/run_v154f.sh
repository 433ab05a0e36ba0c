#!/usr/bin/env bash
# scratch (v154): the GPU tests at the final code, then matrix.py at the headline shape, a length that is not a
# multiple of 4, and (4, 16, 4096, 128) full
OUT=$OUT bash packages/flashattn2/benchmarks/gpu_pass.sh tests
PYTHONPATH=packages/flashattn2/src timeout 240 python packages/flashattn2/benchmarks/matrix.py \
  --shapes '[[1,16,16,16384,64,true],[16,16,16,2049,64,true],[4,16,16,4096,128,false]]' --out "$OUT/matrix3.json" \
  2>&1 | grep -v Warning | tail -12
