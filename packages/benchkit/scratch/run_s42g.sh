#!/usr/bin/env bash
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
timeout 200 python3 packages/benchkit/scratch/drain_cost.py "$OUT/drain-xl-b8.json" xl 8 16 2>&1 | grep -v USDT | tail -8
timeout 100 python3 packages/benchkit/scratch/drain_cost.py "$OUT/drain-xl-b4.json" xl 4 16 2>&1 | grep -v USDT | tail -8
