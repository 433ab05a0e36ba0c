#!/bin/bash
# Scratch GPU pass (session 8): host layers; v30 (L and Delta by TMA) check, determinism, timing, ncu source stalls.
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
S=packages/flashattn2/benchmarks/scratch
timeout 120 python $S/host_probe2.py 2>&1; echo host rc=$?
GBWD=gbwd_v4 GB_ORDER=2 GB_HV=259 ONLY_D=64 timeout 200 python $S/gbwd_check.py check > $OUT/v30-check.log 2>&1; echo check rc=$?
cut -c1-400 $OUT/v30-check.log | tail -8
GBWD=gbwd_v4 GB_ORDER=2 GB_HV=259 ONLY_D=64 timeout 120 python $S/gbwd_check.py determinism > $OUT/v30-det.log 2>&1; echo det rc=$?
tail -4 $OUT/v30-det.log | cut -c1-400
timeout 300 python $S/run_v30.py > /tmp/v30-timing.log 2>&1; echo timing rc=$?
cut -c1-1500 /tmp/v30-timing.log
timeout 150 ncu -k regex:_attention_backward_kernel --launch-skip 1 -c 1 --section SourceCounters --section WarpStateStats \
    --import-source no -f -o /tmp/rep30 python $S/ncu_v30.py > /tmp/ncu30.log 2>&1; echo ncu rc=$?
ncu -i /tmp/rep30.ncu-rep --page source --csv --print-source sass > $OUT/v30-src.csv 2>/dev/null; gzip -f $OUT/v30-src.csv
python $S/src_cons.py $OUT/v30-src.csv.gz 16 | cut -c1-160
ls $OUT
