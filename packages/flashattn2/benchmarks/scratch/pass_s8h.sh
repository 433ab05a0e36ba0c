#!/bin/bash
# Scratch GPU pass (session 8): GPU tests with the one-launch backward; where one launch wins; host time, 117ebf5 against the working tree.
# old_src: the package at 117ebf5 (git archive 117ebf5 packages/flashattn2/src/flashattn2, copied to $S/old_src).
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
S=packages/flashattn2/benchmarks/scratch
B=packages/flashattn2/benchmarks
timeout 200 python $B/one_launch.py --out $OUT/one_launch.json 2>&1 | tail -12
for round in 1 2 3; do
  for which in old new; do
    if [ $which = old ]; then P=$S/old_src:$PYTHONPATH; else P=$PYTHONPATH; fi
    PYTHONPATH=$P timeout 120 python $B/matrix.py --host --out $OUT/host-$which-$round.json 2>&1 | grep "host," | sed "s/^/$which /"
  done
done
timeout 330 python -m pytest -q packages/flashattn2/tests/test_gpu.py packages/flashattn2/tests/test_api.py packages/flashattn2/tests/test_launch.py 2>&1 | tail -3
