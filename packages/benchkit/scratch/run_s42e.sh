#!/usr/bin/env bash
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
timeout 300 python3 packages/benchkit/scratch/gc_stalls.py "$OUT/gc-xl-b8.json" xl 8 4 2>&1 | grep -v USDT | tee "$OUT/gc-xl-b8.log" | tail -70
