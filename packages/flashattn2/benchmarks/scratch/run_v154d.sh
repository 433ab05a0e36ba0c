#!/usr/bin/env bash
# scratch (v154): ncu's kernel durations (base clocks), old and new in alternating processes: head dims 64 causal
# and 128 causal and full
export PYTHONPATH=packages/flashattn2/src
for i in 1 2 3 4 5 6; do
  for way in old new; do
    [ $((i % 2)) -eq 0 ] && way=$([ $way = old ] && echo new || echo old)
    timeout 100 ncu --profile-from-start off --metrics gpu__time_duration.sum --csv \
      python packages/flashattn2/benchmarks/scratch/ncu_rows.py $way 0 3 4 > "$OUT/ncu-$way-$i.csv" 2>&1
    echo "$i $way rc=$?"
  done
done
