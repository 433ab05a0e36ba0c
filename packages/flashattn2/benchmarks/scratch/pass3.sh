#!/bin/bash
# Scratch GPU pass 3 (session 19): wave quantization of the full walk (waves.py).
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks/scratch PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout 400 python $S/waves.py 2>&1 | grep -v Warn | tee $OUT/waves.log
