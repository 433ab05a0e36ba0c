#!/usr/bin/env bash
# Scratch: ab_buckets.py on a 2-GPU machine at the shape (xl, batch 4) and at two GPU-bound ones.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
mkdir -p "$OUT/r"
timeout 200 python3 packages/benchkit/scratch/ab_buckets.py "$OUT/r/xl-b4.json" xl 4 20 2>&1 | grep -v USDT | tee "$OUT/r/xl-b4.log"
timeout 200 python3 packages/benchkit/scratch/ab_buckets.py "$OUT/r/xl-b12.json" xl 12 12 2>&1 | grep -v USDT | tail -20 | tee "$OUT/r/xl-b12.log"
timeout 100 python3 packages/benchkit/scratch/ab_buckets.py "$OUT/r/small-b32.json" small 32 20 2>&1 | grep -v USDT | tail -20 | tee "$OUT/r/small-b32.log"
tar czf "$OUT/ab_buckets.tar.gz" -C "$OUT" r && rm -r "$OUT/r"
