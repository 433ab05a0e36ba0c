#!/usr/bin/env bash
# Scratch: GPU tests of ddp and zero1 over NCCL, the drain A/B (xl batch 8), then benchkit ddp at the four
# shapes of BENCHMARKS.md's ddp section on the final code.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
mkdir -p "$OUT/r"
timeout 120 python3 -m pytest -q -m gpu packages/ddp packages/zero1 2>&1 | tail -5 | tee "$OUT/r/gpu-tests.log"
timeout 150 python3 packages/benchkit/scratch/drain_cost.py "$OUT/r/drain-xl-b8.json" xl 8 16 2>&1 | grep -v USDT | tail -9
ARGS=(--nproc 2 --context-length 512 --precision bf16 --warmup 2 --steps 5
  --variants local naive overlap bucketed bucketed-bf16 torch-ddp --bucket-mb 25 --timeout-s 200)
timeout 90 python3 -m benchkit ddp --size xl --batch-size 4 --rounds 3 "${ARGS[@]}" --out "$OUT/r/ddp_xl" 2>&1 | grep -v USDT | grep -E "^xl|^size|rror" | tail -8
timeout 60 python3 -m benchkit ddp --size small --batch-size 4 --rounds 3 "${ARGS[@]}" --out "$OUT/r/ddp_small" 2>&1 | grep -v USDT | grep -E "^small|^size|rror" | tail -8
timeout 100 python3 -m benchkit ddp --size xl --batch-size 8 --rounds 4 "${ARGS[@]}" --out "$OUT/r/ddp_xl_b8" 2>&1 | grep -v USDT | grep -E "^xl|^size|rror" | tail -8
timeout 60 python3 -m benchkit ddp --size small --batch-size 32 --rounds 4 "${ARGS[@]}" --out "$OUT/r/ddp_small_b32" 2>&1 | grep -v USDT | grep -E "^small|^size|rror" | tail -8
tar czf "$OUT/final.tar.gz" -C "$OUT" r && rm -r "$OUT/r"
