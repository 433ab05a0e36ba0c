#!/usr/bin/env bash
# The ddp and zero1 GPU results (issues 4 and 5) in one pass on a 4-GPU machine
# (written for 4 H200s; at most BUDGET_S = 540 s).
#
#   OUT=/path/to/empty/dir bash packages/benchkit/scripts/multi_gpu_pass.sh   # from the repository root
#
# Steps, most important first, each under its own time limit and all within BUDGET_S:
#   ddp4            benchkit ddp on 4 GPUs: every wrapper, BucketedDDP at 1-1000 MB and
#                   torch DDP at 25 MB, small and xl, context 512, bf16 autocast
#   zero            benchkit zero on 2 and 4 GPUs: AdamW, ShardedOptimizer (bucketed and
#                   per-parameter) and ZeroRedundancyOptimizer, small and xl
#   ddp2            benchkit ddp on 2 GPUs, as ddp4
#   allreduce_nccl  NCCL all-reduce, 1 MB to 1 GB, 2 and 4 ranks (6 needs more GPUs)
#   gpu_tests       pytest -m gpu for ddp and zero1 (NCCL)
#   ddp_torchrun    benchkit ddp started by torchrun instead of --nproc
#   allreduce_gloo  gloo all-reduce of CPU tensors at 2, 4 and 6 ranks
#   run             benchkit run, whose DDP/ZeRO-1 check runs on up to 4 GPUs (NCCL)
#                   here; last, so mostly run alone: ONLY=run
# Output files: as gpu_pass.sh (summary.md, results.tar.gz, traces.tar.gz, gpu_pass.log).
#
# NVLink multicast stays off (the machines' rule: it can take a shared host's GPUs down).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BUDGET_S=${BUDGET_S:-540}
PASS_TITLE="benchkit multi-GPU pass (ddp, zero1, all-reduce)"
source "$(dirname "$0")/steps.sh"

DDP_ARGS=(--size small xl --context-length 512 --batch-size 4 --precision bf16 --timeout-s 130)
step machine 20 nvidia-smi topo -m
step ddp4 140 $PY -m benchkit ddp --nproc 4 "${DDP_ARGS[@]}" --out "$R/ddp4"
step zero 150 $PY -m benchkit zero --size small xl --nproc 2 4 --context-length 256 --batch-size 4 \
  --warmup 3 --steps 10 --timeout-s 140 --out "$R/zero"
step ddp2 120 $PY -m benchkit ddp --nproc 2 "${DDP_ARGS[@]}" --out "$R/ddp2"
step allreduce_nccl 50 $PY -m benchkit allreduce --backend nccl --world-sizes 2 4 6 --out "$R/allreduce_nccl"
step gpu_tests 40 $PY -m pytest -q -m gpu packages/ddp packages/zero1
step ddp_torchrun 45 $PY -m torch.distributed.run --standalone --nproc-per-node 2 -m benchkit ddp \
  --size small --variants local bucketed torch-ddp --bucket-mb 25 --context-length 512 --batch-size 4 \
  --precision bf16 --out "$R/ddp_torchrun"
step allreduce_gloo 70 $PY -m benchkit allreduce --backend gloo --world-sizes 2 4 6 --warmup 1 --iters 5 \
  --out "$R/allreduce_gloo"
step run 150 $PY -m benchkit run --device cuda --out "$R/run"

finish
