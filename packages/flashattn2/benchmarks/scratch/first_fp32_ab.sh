#!/usr/bin/env bash
# scratch (v133): fp32 (4, 128, 64) first forward+backward in fresh processes with empty Triton caches, the backward
# as one launch (the previous package: fp32 in ONE_LAUNCH_DTYPES) against two kernels, alternating.
set -uo pipefail
src=$PWD/packages/flashattn2/src
old=$(mktemp -d)/src && cp -r "$src" "$old"
sed -i 's/^ONE_LAUNCH_DTYPES = (torch.float16, torch.bfloat16)$/ONE_LAUNCH_DTYPES = (torch.float16, torch.bfloat16, torch.float32)/' \
  "$old/flashattn2/_triton_backward.py"
grep -n "^ONE_LAUNCH_DTYPES" "$old/flashattn2/_triton_backward.py"
for round in 0 1 2; do
  for way in one two; do
    [ $((round % 2)) = 1 ] && way=$([ $way = one ] && echo two || echo one)
    path=$([ $way = one ] && echo "$old" || echo "$src")
    for causal in true false; do
      cache=$(mktemp -d)
      r=$(TRITON_CACHE_DIR=$cache PYTHONPATH=$path python packages/flashattn2/benchmarks/matrix.py \
        --first-call-child fp32 "[4,1,1,128,64,$causal]" | tail -1)
      echo "{\"round\": $round, \"way\": \"$way\", \"causal\": $causal, \"times\": $r}" | tee -a "$OUT/first_fp32_ab.jsonl"
      rm -rf "$cache"
    done
  done
done
