#!/usr/bin/env bash
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1 CUDA_LAUNCH_BLOCKING=1
S=packages/flashattn2/benchmarks/scratch
for args in "forward 1 -0.3" "forward 0 -0.3" "forward 1 0.125" "backward 0 -0.3" "backward 0 0.125" "forward 1 -0.3 1000" "forward 1 -0.3 200" "backward 1 -0.3 1000"; do
  echo "== $args"; timeout 120 python $S/diag_385.py $args 2>&1 | grep -E "ok|Error|error|three" | head -3
done
