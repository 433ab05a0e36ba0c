#!/usr/bin/env bash
# scratch (v170): the A-from-registers backward variants against the package's, on the GPU machine.
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" | tee -a "$OUT/gpu.txt"
(while true; do nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader; sleep 0.5; done) \
  > "$OUT/clocks.csv" &
monitor=$!
timeout 520 python3 packages/flashattn2/benchmarks/scratch/ab_rs.py 2>&1 | tee "$OUT/ab_rs.log" | grep -v Warning
kill $monitor
