#!/usr/bin/env bash
# One GPU pass of flashattn2: the GPU tests, then the benchmarks, each writing under $OUT.
#
#   OUT=/tmp/pass bash packages/flashattn2/benchmarks/gpu_pass.sh [STEP ...]
#
# Steps (default: all, in this order): tests matrix host first tiles64 tiles128
# (and, not by default: profile, one_launch, hopper, hopper_forward, tiles64short, tiles128full, tiles256,
# tiles64fp32, model: the benchkit medium model's bf16 training step at context 4096 with flashattn2 and SDPA).
# Run from the repository root. Each step has a time limit so that one slow step
# leaves the others their time; each benchmark step writes $OUT/<step>.json, the
# test step $OUT/tests.log.
set -uo pipefail
: "${OUT:?set OUT to a folder for the results}"
mkdir -p "$OUT"
export PYTHONPATH=packages/flashattn2/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
bench=packages/flashattn2/benchmarks
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests matrix host first tiles64 tiles128)
for step in "${steps[@]}"; do
  echo "=== $step ($(date +%T))"
  case $step in
    tests) timeout 300 python -m pytest packages/flashattn2/tests -m gpu -n 4 -v -p no:cacheprovider \
      -o faulthandler_timeout=150 2>&1 \
      | tee "$OUT/tests.log" | tail -25 ;;
    matrix) timeout 300 python $bench/matrix.py --out "$OUT/matrix.json" ;;
    host) timeout 60 python $bench/matrix.py --host --out "$OUT/host.json" ;;
    first) timeout 200 python $bench/matrix.py --first-call --out "$OUT/first.json" ;;
    tiles64) timeout 200 python $bench/tiles.py --shape 1 16 16384 64 --causal --out "$OUT/tiles64.json" ;;
    profile) timeout 120 python $bench/host_time.py | tee "$OUT/profile.log" ;;
    one_launch) timeout 200 python $bench/one_launch.py --out "$OUT/one_launch.json" ;;
    hopper) timeout 200 python $bench/hopper_kernels.py --kernel backward --out "$OUT/hopper.json" ;;
    hopper_forward) timeout 200 python $bench/hopper_kernels.py --kernel forward --out "$OUT/hopper_forward.json" ;;
    tiles64short) timeout 200 python $bench/tiles.py --shape 8 16 1024 64 --causal --out "$OUT/tiles64short.json" ;;
    tiles128) timeout 200 python $bench/tiles.py --shape 4 16 4096 128 --causal --out "$OUT/tiles128.json" ;;
    tiles128full) timeout 200 python $bench/tiles.py --shape 4 16 4096 128 --out "$OUT/tiles128full.json" ;;
    tiles256) timeout 200 python $bench/tiles.py --shape 2 16 4096 256 --causal --out "$OUT/tiles256.json" ;;
    tiles64fp32) timeout 200 python $bench/tiles.py --shape 4 16 2048 64 --causal --dtype fp32 \
      --out "$OUT/tiles64fp32.json" ;;
    model) for attention in flashattn2 sdpa; do
        PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src \
          timeout 150 python -m benchkit model --size medium --precision bf16 --mode train-step \
          --context-length 4096 --batch-size 4 --attention $attention --out "$OUT/model-$attention"
      done ;;
    *) echo "unknown step $step" ;;
  esac 2>&1
done
