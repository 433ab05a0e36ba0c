#!/usr/bin/env bash
# The single-GPU pass: flashattn2's GPU checks and benchmark, then benchkit's tables
# (written for an H100; at most BUDGET_S = 570 s). ONLY="step names" runs a subset.
# flashattn2's own pass (tile sweeps, first calls, host time) is
# packages/flashattn2/benchmarks/gpu_pass.sh.
#
#   OUT=/path/to/empty/dir bash packages/benchkit/scripts/gpu_pass.sh     # from the repository root
#
# Runs, most important first, each under its own time limit and all within BUDGET_S seconds:
#   fa2_gpu_tests    flashattn2's GPU tests (realistic sizes, determinism, torch.compile, memory)
#   fa2_matrix       flashattn2 vs SDPA cuDNN and FLASH (packages/flashattn2/benchmarks/matrix.py)
#   model_warmup     all five sizes, forward and forward+backward, context 256, batch 4,
#                    5 warm-up + 10 timed steps, fp32 and bf16 autocast
#   model_no_warmup  the same in fp32 without warm-up steps
#   memory           2.7B peak memory at context 128/256/512, forward-only and full
#                    training step, fp32 and bf16; snapshots, timeline, breakdown vs formula
#   profile          top kernels per phase of the small model's fp32 train step
#   mfu_xl           xl train step, bf16 autocast + flashattn2 + torch.compile, batch 8 x 1024
#                    tokens (compiling takes about 2.5 min on an H100)
#   gpu_tests        pytest -m gpu on benchkit's tests (model, profile, memory on CUDA)
#   run              the end-to-end tour at GPU sizes
# and leaves at most four files in $OUT, rebuilt after every step so that a run cut
# short still returns what it finished:
#   summary.md       every step's command, exit status, wall time and printed tables
#   results.tar.gz   the JSON/CSV results and PNG plots of every step
#   traces.tar.gz    the Chrome trace and the CUDA memory snapshots (large)
#   gpu_pass.log     the raw stderr of every step
BUDGET_S=${BUDGET_S:-570}
PASS_TITLE="GPU pass (one GPU): flashattn2 checks, benchkit results"
source "$(dirname "$0")/steps.sh"

step fa2_gpu_tests 200 $PY -m pytest -q -m gpu -n 4 packages/flashattn2/tests
step fa2_matrix 150 $PY packages/flashattn2/benchmarks/matrix.py --out "$R/fa2_matrix.json"
step model_warmup 120 $PY -m benchkit model --device cuda --size small medium large xl 2.7B \
  --context-length 256 --batch-size 4 --mode forward forward-backward --precision fp32 bf16 \
  --warmup 5 --steps 10 --out "$R/model_warmup"
step profile 45 $PY -m benchkit profile --device cuda --size small --context-length 256 --batch-size 4 \
  --mode train-step --precision fp32 --warmup 5 --steps 5 --top 15 --out "$R/profile"
step memory 90 $PY -m benchkit memory --device cuda --size 2.7B --context-length 128 256 512 \
  --batch-size 4 --precision fp32 bf16 --out "$R/memory"
step model_no_warmup 45 $PY -m benchkit model --device cuda --size small medium large xl 2.7B \
  --context-length 256 --batch-size 4 --mode forward forward-backward --precision fp32 \
  --warmup 0 --steps 10 --out "$R/model_no_warmup"
step mfu_xl 240 $PY -m benchkit model --device cuda --size xl --context-length 1024 --batch-size 8 \
  --mode train-step --precision bf16 --attention flashattn2 --compile --warmup 3 --steps 10 --out "$R/mfu_xl"
step gpu_tests 60 $PY -m pytest -q -m gpu packages/benchkit/tests
step run 100 $PY -m benchkit run --device cuda --out "$R/run"

finish
