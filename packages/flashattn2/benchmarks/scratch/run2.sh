#!/bin/bash
# session 22, call 2: the GPU tests and matrix.py on f3b7ca0 (the persistent forward), then the package's forward
# (gf_pkg, a copy) against the previous package's (gf_head)
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv
timeout 300 python -m pytest packages/flashattn2/tests -m gpu -n 4 -q -p no:cacheprovider 2>&1 | tee $OUT/2026-11-27-h100-s22-gpu-tests.log | tail -4
timeout 200 python packages/flashattn2/benchmarks/matrix.py --out $OUT/2026-11-27-h100-s22-matrix.json 2>&1 | tail -16
cd packages/flashattn2/benchmarks/scratch
AB_ROUNDS=5 AB_NAME=2026-11-27-h100-s22-v89-package-forward AB_SHAPES='[[4,16,16,4096,128,false],[4,16,16,4096,64,false],[2,32,8,4096,128,false],[8,16,16,1024,128,false],[4,16,16,4096,128,true]]' timeout 120 python ab_fwd.py gf_pkg 2>&1 | grep -v Warning | tail -6
