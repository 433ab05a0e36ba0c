#!/bin/bash
# Scratch GPU pass 1 (session 13): forward variants A/B; ncu stall sampling of the D = 128 full forward.
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout 300 python $S/ab_fwd.py gf_qreg gf_turn gf_turn_nb gf_qreg_turn gf_qreg_turn_nb 2>&1 | tail -12
timeout 150 ncu -k regex:_hopper_forward_kernel --launch-skip 1 -c 1 --section SourceCounters --section WarpStateStats \
  --import-source no -f -o /tmp/rep python $S/ncu_fwd.py > /tmp/ncu_run.log 2>&1; echo ncu rc=$?; tail -2 /tmp/ncu_run.log
ncu -i /tmp/rep.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $OUT/src_fwd.csv.gz
python $S/src_cons.py $OUT/src_fwd.csv.gz 30 > $OUT/src_fwd_cons.txt 2>&1; head -c 6000 $OUT/src_fwd_cons.txt
