#!/usr/bin/env bash
# scratch (v154): the GPU tests at HEAD, then the Hopper backward without its length rule at 2048-2051 keys
OUT=$OUT bash packages/flashattn2/benchmarks/gpu_pass.sh tests
export PYTHONPATH=packages/flashattn2/src CUDA_LAUNCH_BLOCKING=1
for n in 2048 2049 2050 2051 2052; do
  timeout 60 python packages/flashattn2/benchmarks/scratch/probe_length.py $n 64 1 1 16 > /tmp/p.log 2>&1; rc=$?; tail -2 /tmp/p.log
  echo "n=$n rc=$rc"
done | tee "$OUT/probe.log"
