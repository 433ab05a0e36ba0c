#!/bin/bash
# session 22, call 9: the GPU tests and matrix.py on the session's last kernel commit
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
timeout 300 python -m pytest packages/flashattn2/tests -m gpu -n 4 -q -p no:cacheprovider -o faulthandler_timeout=200 2>&1 | tee $OUT/2026-11-27-h100-s22-gpu-tests.log | tail -3
timeout 200 python packages/flashattn2/benchmarks/matrix.py --out $OUT/2026-11-27-h100-s22-matrix.json 2>&1 | tail -14
