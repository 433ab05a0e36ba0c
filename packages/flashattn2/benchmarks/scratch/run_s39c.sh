#!/usr/bin/env bash
# session 39, call 4 (H200): source-level warp-stall sampling of the headline's three-consumer Hopper forward (as
# v143 (b) did for the two-consumer one), clocks left alone.
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
python $S/ncu_pass.py 1 16 16384 64 causal fwd
timeout 240 ncu --clock-control none -k regex:_hopper_forward_kernel --section WarpStateStats --section SourceCounters \
  --section InstructionStats -o $OUT/forward python $S/ncu_pass.py 1 16 16384 64 causal fwd > $OUT/ncu-forward.log 2>&1
tail -3 $OUT/ncu-forward.log
ncu -i $OUT/forward.ncu-rep --page source --csv --print-source sass > $OUT/forward-sass.csv 2> $OUT/forward-sass.err
ncu -i $OUT/forward.ncu-rep --page details > $OUT/forward-details.txt 2>&1
ls -la $OUT/forward-sass.csv; head -c 600 $OUT/forward-sass.csv; echo
gzip -f $OUT/forward-sass.csv; rm -f $OUT/forward.ncu-rep
grep -E "Stall|stall|Warp Cycles" $OUT/forward-details.txt | head -30
