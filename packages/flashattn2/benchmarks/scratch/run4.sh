#!/bin/bash
# session 22, call 4: the Gluon kernels launched directly (CompiledLaunch) against through Triton's JIT, then the
# non-causal forward's thresholds again with the direct launch
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
cd packages/flashattn2/benchmarks/scratch
timeout 240 python host_ab.py 2>&1 | grep -v Warn | tail -12
sed -i 's/v89-forward-thresholds-full/v92-forward-thresholds-full-direct/' thresholds.py
timeout 200 python thresholds.py 2>&1 | grep -v Warn | tail -10
cd /work 2>/dev/null; cd - >/dev/null; cd ../../../..
timeout 280 python -m pytest packages/flashattn2/tests -m gpu -n 4 -q -p no:cacheprovider 2>&1 | tee $OUT/2026-11-27-h100-s22-gpu-tests-direct.log | tail -3
