#!/bin/bash
# Scratch GPU pass (session 9): interleaved deterministic chains (run_v34.py); the reduce-overhead probe (ro_probe.py).
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 150 python $S/ro_probe.py > $OUT/ro-probe.log 2>&1; echo ro rc=$?; cut -c1-400 $OUT/ro-probe.log | grep -v Warning | head -20
timeout 380 python $S/run_v34.py 2>&1 | tail -30; echo v34 rc=$?
