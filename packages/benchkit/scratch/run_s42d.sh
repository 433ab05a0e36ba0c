#!/usr/bin/env bash
# Scratch: benchkit ddp at GPU-bound batches (xl batch 8, small batch 32) on 2 GPUs, every variant, 4 rounds.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
ARGS=(--nproc 2 --context-length 512 --precision bf16 --rounds 4 --warmup 2 --steps 5
  --variants local naive overlap bucketed bucketed-bf16 torch-ddp --bucket-mb 25 --timeout-s 250)
timeout 280 python3 -m benchkit ddp --size xl --batch-size 8 "${ARGS[@]}" --out "$OUT/ddp_xl_b8" 2>&1 | grep -v USDT | tail -12
timeout 150 python3 -m benchkit ddp --size small --batch-size 32 "${ARGS[@]}" --out "$OUT/ddp_small_b32" 2>&1 | grep -v USDT | tail -12
tar czf "$OUT/ddp_gpu_bound.tar.gz" -C "$OUT" ddp_xl_b8 ddp_small_b32 && rm -r "$OUT/ddp_xl_b8" "$OUT/ddp_small_b32"
