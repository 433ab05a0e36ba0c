#!/usr/bin/env bash
# v138, kept: the package's head-dim-256 forward (128-key tiles, P through shared memory) against 9e9e9f8's
# (gf_old) and cuDNN's; GPU tests; matrix rows at head dim 256.
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
(cd packages/flashattn2/benchmarks/scratch && AB_ROUNDS=5 timeout 200 python ab_p256.py gf_old 2>&1 | tee "$OUT/ab_old.log" | grep -v "^  " | cut -c1-330)
mv packages/flashattn2/benchmarks/scratch/ab_p256.json "$OUT/ab_old.json" 2>/dev/null || cp "$OUT/ab_p256.json" "$OUT/ab_old.json" 2>/dev/null
timeout 150 python packages/flashattn2/benchmarks/matrix.py --shapes '[[2,16,16,4096,256,true],[2,16,16,4096,256,false],[4,16,16,2048,256,false]]' --rounds 5 --out "$OUT/matrix-d256.json" 2>&1 | tail -12
timeout 280 python -m pytest packages/flashattn2/tests -m gpu -n 4 -q -p no:cacheprovider -o faulthandler_timeout=150 > "$OUT/gpu-tests.log" 2>&1; tail -4 "$OUT/gpu-tests.log"
