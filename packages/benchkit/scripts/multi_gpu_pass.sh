#!/usr/bin/env bash
# The ddp and zero1 GPU results in one pass on one multi-GPU machine: every step runs on
# NPROC GPUs (default: all visible). At most BUDGET_S = 480 s, to fit one 10-minute
# device command with the machine's start.
#
#   OUT=/path/to/empty/dir bash packages/benchkit/scripts/multi_gpu_pass.sh     # from the repository root
#   OUT=... NPROC=4 ONLY="ddp_xl zero" bash packages/benchkit/scripts/multi_gpu_pass.sh   # 4 of 8 GPUs, two steps
#
# Steps, most important first, each under its own time limit and all within BUDGET_S
# (bf16 autocast, fused AdamW, context 512, batch 4 per rank, one process per GPU):
#   machine      nvidia-smi topo -m: how the GPUs are linked
#   ddp_xl       benchkit ddp, xl: local, naive, overlap, BucketedDDP 25 MB, the same with
#                compress_bf16, torch DDP at its defaults; 3 interleaved rounds (--rounds),
#                per-phase times, hidden communication and peak memory per variant
#   ddp_small    the same for the small model
#   zero         benchkit zero, small and xl: AdamW, ShardedOptimizer, ZeroRedundancyOptimizer
#   compression  the small model's loss over 200 steps, BucketedDDP with and without
#                compress_bf16 (scripts/compression_loss.py)
#   gpu_tests    pytest -m gpu for ddp and zero1 (NCCL)
#   allreduce    NCCL all-reduce bus bandwidth, 1 MB to 1 GB, at NPROC ranks
# Output files: as gpu_pass.sh (summary.md, results.tar.gz, traces.tar.gz, gpu_pass.log).
#
# NVLink multicast stays off (the machines' rule: it can take a shared host's GPUs down).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BUDGET_S=${BUDGET_S:-480}
PASS_TITLE="benchkit multi-GPU pass (ddp, zero1, all-reduce)"
source "$(dirname "$0")/steps.sh"
NPROC=${NPROC:-$(nvidia-smi -L | wc -l)}

DDP_ARGS=(--nproc "$NPROC" --context-length 512 --batch-size 4 --precision bf16 --rounds 3 --warmup 2 --steps 5
  --variants local naive overlap bucketed bucketed-bf16 torch-ddp --bucket-mb 25 --timeout-s 200)
step machine 20 nvidia-smi topo -m
step ddp_xl 200 $PY -m benchkit ddp --size xl "${DDP_ARGS[@]}" --out "$R/ddp_xl"
step ddp_small 60 $PY -m benchkit ddp --size small "${DDP_ARGS[@]}" --out "$R/ddp_small"
step zero 120 $PY -m benchkit zero --size small xl --nproc "$NPROC" --context-length 512 --batch-size 4 \
  --warmup 2 --steps 5 --timeout-s 110 --out "$R/zero"
step compression 60 $PY packages/benchkit/scripts/compression_loss.py --nproc "$NPROC" --size small --steps 200 \
  --out "$R/compression_loss.json"
step gpu_tests 40 $PY -m pytest -q -m gpu packages/ddp packages/zero1
step allreduce 40 $PY -m benchkit allreduce --backend nccl --world-sizes "$NPROC" --out "$R/allreduce"

finish
