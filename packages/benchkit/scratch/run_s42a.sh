#!/usr/bin/env bash
# Scratch: the ddp timeline pass on a 2-GPU machine (see ddp_timeline.py).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
python3 -c 'import torch, torch.distributed as d; print(torch.__version__, torch.cuda.nccl.version(), torch.cuda.device_count())' | tee "$OUT/versions.txt"
timeout 280 python3 packages/benchkit/scratch/ddp_timeline.py "$OUT" xl local torch-ddp-25MB bucketed-25MB 2>&1 | grep -v USDT | tee "$OUT/xl.log"
timeout 120 python3 packages/benchkit/scratch/ddp_timeline.py "$OUT" small local torch-ddp-25MB bucketed-25MB 2>&1 | grep -v USDT | tee "$OUT/small.log"
gzip "$OUT"/trace-*.json
ls -la "$OUT"
