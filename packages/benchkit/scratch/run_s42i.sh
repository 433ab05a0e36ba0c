#!/usr/bin/env bash
# Scratch: on one machine, BucketedDDP against torch DDP at xl batch 8 in both harnesses: benchkit ddp's
# blocks (a fresh copy per variant and round, 2 warm-up + 5 timed steps) and steps interleaved one by one.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
mkdir -p "$OUT/r"
timeout 100 python3 -m benchkit ddp --size xl --batch-size 8 --nproc 2 --context-length 512 --precision bf16 \
  --rounds 4 --warmup 2 --steps 5 --variants bucketed torch-ddp --bucket-mb 25 --timeout-s 90 --out "$OUT/r/blocks" \
  2>&1 | grep -E "^xl|^size" | tail -4
timeout 120 python3 packages/benchkit/scratch/ab_buckets.py "$OUT/r/interleaved.json" xl 8 20 2>&1 | grep -v USDT | tail -5
timeout 100 python3 -m benchkit ddp --size xl --batch-size 8 --nproc 2 --context-length 512 --precision bf16 \
  --rounds 4 --warmup 2 --steps 5 --variants bucketed torch-ddp --bucket-mb 25 --timeout-s 90 --out "$OUT/r/blocks2" \
  2>&1 | grep -E "^xl|^size" | tail -4
tar czf "$OUT/harness.tar.gz" -C "$OUT" r && rm -r "$OUT/r"
