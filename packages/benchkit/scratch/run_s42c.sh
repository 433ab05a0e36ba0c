#!/usr/bin/env bash
# Scratch: ab_buckets.py again, longer, at the shape (xl, batch 4) and at a GPU-bound xl shape (batch 8).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
mkdir -p "$OUT/r"
timeout 220 python3 packages/benchkit/scratch/ab_buckets.py "$OUT/r/xl-b4-long.json" xl 4 45 2>&1 | grep -v USDT | tail -8 | tee "$OUT/r/xl-b4-long.log"
timeout 220 python3 packages/benchkit/scratch/ab_buckets.py "$OUT/r/xl-b8.json" xl 8 16 2>&1 | grep -v USDT | tail -8 | tee "$OUT/r/xl-b8.log"
tar czf "$OUT/ab_buckets2.tar.gz" -C "$OUT" r && rm -r "$OUT/r"
