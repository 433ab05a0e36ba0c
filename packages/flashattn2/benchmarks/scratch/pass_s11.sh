#!/bin/bash
# Scratch GPU pass (session 11): matrix twice, host and first calls; ncu stall sampling of the D = 128 backward.
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
B=packages/flashattn2/benchmarks; S=$B/scratch
timeout 150 python $B/matrix.py --out $OUT/matrix1.json 2>&1 | tail -13
timeout 60 python $B/matrix.py --host --out $OUT/host.json 2>&1 | tail -4
timeout 150 python $B/matrix.py --first-call --out $OUT/first.json 2>&1 | tail -12
timeout 150 ncu -k regex:_hopper_backward_kernel --launch-skip 1 -c 1 --section SourceCounters --section WarpStateStats \
  --import-source no -f -o /tmp/rep python $S/ncu_bwd.py > /tmp/ncu_run.log 2>&1; echo ncu rc=$?; tail -2 /tmp/ncu_run.log
ncu -i /tmp/rep.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $OUT/src.csv.gz
python $S/src_cons.py $OUT/src.csv.gz 25 > $OUT/src_cons.txt 2>&1; head -c 5000 $OUT/src_cons.txt
timeout 150 python $B/matrix.py --out $OUT/matrix2.json 2>&1 | tail -13
