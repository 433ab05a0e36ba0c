#!/usr/bin/env bash
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1 CUDA_LAUNCH_BLOCKING=1 PYTHONWARNINGS=error::RuntimeWarning
S=packages/flashattn2/benchmarks/scratch
for args in "385 64 1" "513 64 1" "449 64 1" "640 64 1" "1000 64 1" "385 64 0" "385 128 1" "513 64 1 4 16"; do
  r=$(timeout 30 python $S/probe_short.py $args 2>&1 | grep -E "^ok|illegal|Error" | head -1 | cut -c1-150)
  echo "$args: ${r:-timeout}"
done
