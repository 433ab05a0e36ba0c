#!/usr/bin/env bash
# Scratch: how many CTAs NCCL's all-reduces take from the backward: benchkit ddp at xl batch 8 on 2 GPUs
# with NCCL_MAX_CTAS unset, 16, 8 and 4.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
ARGS=(--size xl --batch-size 8 --nproc 2 --context-length 512 --precision bf16 --rounds 3 --warmup 2 --steps 5
  --variants local naive bucketed torch-ddp --bucket-mb 25 --timeout-s 150)
for ctas in default 16 8 4; do
  if [[ $ctas == default ]]; then unset NCCL_MAX_CTAS; else export NCCL_MAX_CTAS=$ctas; fi
  echo "=== NCCL_MAX_CTAS=$ctas"
  timeout 170 python3 -m benchkit ddp "${ARGS[@]}" --out "$OUT/ctas-$ctas" 2>&1 | grep -v USDT | grep -E "^xl|^size|error|Error" | tail -8
done
tar czf "$OUT/ctas.tar.gz" -C "$OUT" $(cd "$OUT" && ls -d ctas-*) && rm -r "$OUT"/ctas-*/
