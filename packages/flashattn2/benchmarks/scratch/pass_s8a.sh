#!/bin/bash
# Scratch GPU pass (session 8): host-time probe; ncu source-level stall sampling of the gbwd_v4 kernel.
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
timeout 150 python $S/host_probe.py > $OUT/host_probe.log 2>&1; echo host rc=$?
grep -E "^(throughput|latency|nolaunch|single)" $OUT/host_probe.log
ncu --version | tail -1
for r in 0 1; do  # 0: deterministic order, 1: atomic order
  timeout 200 ncu -k regex:_attention_backward_kernel --launch-skip $r -c 1 --section SourceCounters --section WarpStateStats \
    --import-source no -f -o /tmp/rep$r python $S/ncu_src.py > /tmp/ncu_run$r.log 2>&1; echo ncu$r rc=$?
  tail -2 /tmp/ncu_run$r.log
  ncu -i /tmp/rep$r.ncu-rep --page source --csv --print-source sass > $OUT/src$r.csv 2> /tmp/src_err$r.txt \
   || ncu -i /tmp/rep$r.ncu-rep --page source --csv > $OUT/src$r.csv 2>> /tmp/src_err$r.txt
  head -c 600 /tmp/src_err$r.txt; wc -c $OUT/src$r.csv
  python $S/src_top.py $OUT/src$r.csv > $OUT/src_top$r.txt 2>&1; head -c 6000 $OUT/src_top$r.txt
  ncu -i /tmp/rep$r.ncu-rep --page details --section WarpStateStats 2>&1 | grep -iE "stall|cycles" | head -30
done
gzip -f $OUT/src0.csv $OUT/src1.csv $OUT/trace_ours.json $OUT/trace_sdpa.json 2>/dev/null
ls -la $OUT
