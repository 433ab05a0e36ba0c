#!/bin/bash
# Scratch GPU pass (session 8): host time per eager fwd+bwd, old (HEAD) and new launch path, alternating; matrix --host
# old_src: the package at 117ebf5 (git archive 117ebf5 packages/flashattn2/src/flashattn2, copied to $S/old_src).
# with short alternating rounds.
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
S=packages/flashattn2/benchmarks/scratch
B=packages/flashattn2/benchmarks
nproc; uptime
for round in 1 2 3; do
  for which in old new; do
    if [ $which = old ]; then P=$S/old_src:$PYTHONPATH; else P=$PYTHONPATH; fi
    PYTHONPATH=$P timeout 120 python $B/matrix.py --host --out $OUT/host-$which-$round.json 2>&1 | grep "host," | sed "s/^/$which /"
  done
done
