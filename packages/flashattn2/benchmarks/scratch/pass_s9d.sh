#!/bin/bash
# Scratch GPU pass (session 9): GPU tests with the Hopper backward's thresholds, then the matrix.
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
B=packages/flashattn2/benchmarks
timeout 300 python -m pytest packages/flashattn2/tests/test_gpu.py packages/flashattn2/tests/test_launch.py -n 4 -q -p no:cacheprovider 2>&1 | tee $OUT/tests.log | tail -8
timeout 240 python $B/matrix.py --out $OUT/matrix.json 2>&1 | tail -30
