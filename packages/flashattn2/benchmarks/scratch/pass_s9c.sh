#!/bin/bash
# Scratch GPU pass (session 9): the package with the Hopper backward: GPU tests, then hopper_backward.py.
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
B=packages/flashattn2/benchmarks
timeout 330 python -m pytest packages/flashattn2/tests/test_gpu.py packages/flashattn2/tests/test_launch.py -n 4 -q -p no:cacheprovider -x 2>&1 | tee $OUT/tests.log | tail -30
timeout 230 python $B/hopper_backward.py --out $OUT/hopper.json 2>&1 | tail -14
