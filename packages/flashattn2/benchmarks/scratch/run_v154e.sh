#!/usr/bin/env bash
# scratch (v154): ncu's kernel durations (base clocks) of old, new and v1 (new with two TMA loads) in rotating
# processes: head dims 64 causal and 128 full and causal; medians per process to $OUT/v154e.txt
export PYTHONPATH=packages/flashattn2/src
ways=(old new v1)
for i in 0 1 2 3 4 5; do
  for j in 0 1 2; do
    way=${ways[$(((i + j) % 3))]}
    timeout 100 ncu --profile-from-start off --metrics gpu__time_duration.sum --csv \
      python packages/flashattn2/benchmarks/scratch/ncu_rows.py $way 0 3 4 > /tmp/ncu.csv 2>&1
    python3 - "$way" >> "$OUT/v154e.txt" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.reader(open("/tmp/ncu.csv")) if len(r) > 14 and r[4] == "_hopper_backward_kernel"]
v = [float(r[14].replace(",", "")) / 1e3 for r in rows]
print(sys.argv[1], [round(statistics.median(v[k:k + 5])) for k in range(0, len(v), 5)], flush=True)
PY
  done
done
cat "$OUT/v154e.txt"
