#!/usr/bin/env bash
# session 39, call 1 (H200): the side-by-side table, then clocks and power at the headline shape.
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv | tee $OUT/gpu.txt
python -c "import torch, triton; print(torch.__version__, triton.__version__, torch.backends.cudnn.version())" | tee -a $OUT/gpu.txt
git log -1 --format=%h | tee -a $OUT/gpu.txt
timeout 300 python packages/flashattn2/benchmarks/matrix.py --out $OUT/matrix.json 2>&1 | tail -40
timeout 120 python $S/clocks.py 2>&1 | tail -12 | tee $OUT/clocks.txt
