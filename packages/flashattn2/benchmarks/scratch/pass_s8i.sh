#!/bin/bash
# Scratch GPU pass (session 8): GPU tests with ONE_LAUNCH_MAX_SCORES = 4M (one launch now at D = 40..256, fp32); sweep.
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
B=packages/flashattn2/benchmarks
timeout 360 python -m pytest -q packages/flashattn2/tests/test_gpu.py packages/flashattn2/tests/test_api.py packages/flashattn2/tests/test_launch.py 2>&1 | tail -3
timeout 200 python $B/one_launch.py --out $OUT/one_launch.json 2>&1 | tail -13
