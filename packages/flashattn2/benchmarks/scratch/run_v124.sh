#!/bin/bash
# scratch (v124): the causal backward's rule near 2**28 scores at 1024-1536 keys
set -o pipefail
export PYTHONPATH=packages/flashattn2/src
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
python packages/flashattn2/benchmarks/scratch/ab_thr.py 2>&1 | tee "$OUT/ab_thr.log"
