#!/usr/bin/env bash
# v163: the head-dim-64 backward with a dQ warpgroup against the package (backward alone, replays).
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src:$PWD/packages/flashattn2/benchmarks/scratch PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee $OUT/gpu.txt
t0=$(date +%s)
PAIR_REGS=${PAIR_REGS:-192} NSHAPES=${NSHAPES:-8} VARIANTS="${VARIANTS:-gb_dqwg}" timeout ${LIMIT:-520} python $S/ab_dqwg.py 2>&1 | tee $OUT/ab_dqwg.log
echo "total $(( $(date +%s) - t0 )) s"
