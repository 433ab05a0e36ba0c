#!/usr/bin/env bash
# v144: the Hopper backward's consumer step reordered; compiles warmed in parallel, then five alternating rounds.
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src:$PWD/packages/flashattn2/benchmarks/scratch PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
t0=$(date +%s)
for i in 0 1 2 3 4 5 6 7 8; do
  for m in flashattn2._gluon_backward gb_a gb_b gb_ab; do
    if [ $i -ge 6 ] && { [ $m = gb_a ] || [ $m = gb_ab ]; }; then continue; fi
    python $S/ab_ord.py warm $m $i > $OUT/warm-$m-$i.log 2>&1 &
  done
done
wait
echo "warm $(( $(date +%s) - t0 )) s"; grep -l -i "error\|Traceback" $OUT/warm-*.log | head; 
python $S/ab_ord.py 2>&1 | tee $OUT/ab_ord.log
echo "total $(( $(date +%s) - t0 )) s"
