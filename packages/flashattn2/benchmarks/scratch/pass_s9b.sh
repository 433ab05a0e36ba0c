#!/bin/bash
# Scratch GPU pass (session 9): reduce-overhead capture and step time (ro_probe2.py); v34 attribution (run_v34b.py).
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
S=packages/flashattn2/benchmarks/scratch
timeout 200 python $S/ro_probe2.py > $OUT/ro-probe2.log 2>&1; echo ro rc=$?; grep "^{" $OUT/ro-probe2.log; grep -i "error\|skip" $OUT/ro-probe2.log | head -5
timeout 340 python $S/run_v34b.py 2>&1 | tail -12; echo v34b rc=$?
