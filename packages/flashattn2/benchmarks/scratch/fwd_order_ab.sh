#!/usr/bin/env bash
# scratch (v134): the Triton forward's grid as (B x H, query tiles), every pair's heaviest causal query tile first over
# the whole launch, against (query tiles, B x H), heaviest first within each pair; alternating processes.
set -uo pipefail
src=$PWD/packages/flashattn2/src
new=$(mktemp -d)/src && cp -r "$src" "$new"
f=$new/flashattn2/_triton_forward.py
sed -i 's/pid_m = num_m - 1 - tl.program_id(0) if CAUSAL else tl.program_id(0)/pid_m = num_m - 1 - tl.program_id(1) if CAUSAL else tl.program_id(1)/' $f
sed -i 's/    pid_bh = tl.program_id(1)/    pid_bh = tl.program_id(0)/' $f
sed -i 's/(triton.cdiv(self.n_q, tile.block_m), self.query_heads, 1),/(self.query_heads, triton.cdiv(self.n_q, tile.block_m), 1),/' $f
diff "$src/flashattn2/_triton_forward.py" $f
shapes='[[8,16,1024,64],[4,32,1024,64],[4,16,1024,64],[32,16,512,64],[64,16,256,64],[2,16,1024,64]]'
for round in 0 1 2 3 4 5; do
  for way in within global; do
    [ $((round % 2)) = 1 ] && way=$([ $way = within ] && echo global || echo within)
    path=$([ $way = within ] && echo "$src" || echo "$new")
    r=$(PYTHONPATH=$path python packages/flashattn2/benchmarks/scratch/fwd_order_child.py "$shapes" | tail -1)
    echo "{\"round\": $round, \"way\": \"$way\", \"times\": $r}" | tee -a "$OUT/fwd_order_ab.jsonl"
  done
done
