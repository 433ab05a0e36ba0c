#!/bin/bash
# Scratch GPU pass (session 8): v30 in deterministic order: dQ ring depth, polling back-off; ncu source stalls.
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
S=packages/flashattn2/benchmarks/scratch
timeout 150 ncu -k regex:_attention_backward_kernel --launch-skip 0 -c 1 --section SourceCounters --section WarpStateStats \
    --import-source no -f -o /tmp/rep30d python $S/ncu_v30.py > /tmp/ncu30d.log 2>&1; echo ncu rc=$?
ncu -i /tmp/rep30d.ncu-rep --page source --csv --print-source sass > $OUT/v30-det-src.csv 2>/dev/null; gzip -f $OUT/v30-det-src.csv
python $S/src_cons.py $OUT/v30-det-src.csv.gz 16 | cut -c1-160
timeout 400 python $S/run_v30b.py 2>&1 | grep -v "^hv\|^{" ; echo timing rc=$?
python -c "
import json; rows = json.load(open('$OUT/v30b-timing.json'))
for r in rows: print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}))"
