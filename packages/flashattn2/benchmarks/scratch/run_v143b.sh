#!/usr/bin/env bash
# v143 (b): source-level warp-stall sampling of the headline's Hopper backward and forward, SASS per instruction.
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
python $S/ncu_pass.py 1 16 16384 64 causal fwdbwd
for k in backward forward; do
  timeout 200 ncu -k regex:_hopper_${k}_kernel --section WarpStateStats --section SourceCounters --section InstructionStats \
    -o $OUT/$k python $S/ncu_pass.py 1 16 16384 64 causal fwdbwd > $OUT/ncu-$k.log 2>&1
  tail -3 $OUT/ncu-$k.log
  ncu -i $OUT/$k.ncu-rep --page source --csv --print-source sass > $OUT/$k-sass.csv 2> $OUT/$k-sass.err
  ncu -i $OUT/$k.ncu-rep --page details > $OUT/$k-details.txt 2>&1
  ls -la $OUT/$k-sass.csv; head -c 1500 $OUT/$k-sass.csv; echo
  gzip -f $OUT/$k-sass.csv; rm -f $OUT/$k.ncu-rep
done
grep -E "Stall|stall" $OUT/backward-details.txt | head -40
