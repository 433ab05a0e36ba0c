#!/bin/bash
# session 22, call 7: the GPU tests, the package's forward (gf_new: causal persistent at head dim 128) against the
# previous package's (gf_head, b6d620b), and matrix.py
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
timeout 300 python -m pytest packages/flashattn2/tests -m gpu -n 4 -q -p no:cacheprovider -o faulthandler_timeout=200 2>&1 | tee $OUT/2026-11-27-h100-s22-gpu-tests.log | tail -3
(cd packages/flashattn2/benchmarks/scratch && AB_ROUNDS=5 AB_NAME=2026-11-27-h100-s22-v93-package-forward AB_SHAPES='[[3,4,2,2200,128,true],[4,16,16,4096,128,true],[2,32,8,4096,128,true],[8,16,16,2048,128,true],[1,16,16,16384,128,true],[4,16,16,4096,128,false],[1,16,16,16384,64,true]]' timeout 200 python ab_fwd.py gf_new 2>&1 | grep -v Warning | tail -7)
timeout 200 python packages/flashattn2/benchmarks/matrix.py --out $OUT/2026-11-27-h100-s22-matrix.json 2>&1 | tail -14
