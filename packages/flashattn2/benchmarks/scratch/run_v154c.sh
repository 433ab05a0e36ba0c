#!/usr/bin/env bash
# scratch (v154): ncu's kernel durations (base clocks) of the old and new Hopper backward
export PYTHONPATH=packages/flashattn2/src
for way in old new new old; do
  timeout 200 ncu --profile-from-start off --metrics gpu__time_duration.sum --csv \
    python packages/flashattn2/benchmarks/scratch/ncu_rows.py $way > "$OUT/ncu-$way-$RANDOM.csv" 2>&1
  echo "$way rc=$?"
done
