#!/usr/bin/env bash
# Issue 6's GPU results in one pass on one GPU (written for an H100; at most BUDGET_S = 520 s).
#
#   OUT=/path/to/empty/dir bash packages/benchkit/scripts/gpu_pass.sh     # from the repository root
#
# Runs, each under its own time limit and all within BUDGET_S seconds:
#   gpu_tests        pytest -m gpu on benchkit's tests (model, profile, memory on CUDA)
#   model_warmup     all five sizes, forward and forward+backward, context 256, batch 4,
#                    5 warm-up + 10 timed steps, fp32 and bf16 autocast
#   model_no_warmup  the same in fp32 without warm-up steps
#   memory           2.7B peak memory at context 128/256/512, forward-only and full
#                    training step, fp32 and bf16; snapshots, timeline, breakdown vs formula
#   profile          top kernels per phase of the small model's fp32 train step
#   mfu_xl_256       xl train step, bf16 autocast + flashattn2 + torch.compile, context 256
#   run              the end-to-end tour at GPU sizes
#   mfu_xl_1024      the xl MFU run at context 1024 (more tokens per step); last, as the
#                    budget allows
# and leaves at most four files in $OUT, rebuilt after every step so that a run cut
# short still returns what it finished:
#   summary.md       every step's command, exit status, wall time and printed tables
#   results.tar.gz   the JSON/CSV results and PNG plots of every step
#   traces.tar.gz    the Chrome trace and the CUDA memory snapshots (large)
#   gpu_pass.log     the raw stderr of every step
PASS_TITLE="benchkit GPU pass (one GPU)"
source "$(dirname "$0")/steps.sh"

step gpu_tests 90 $PY -m pytest -q -m gpu packages/benchkit/tests
step model_warmup 120 $PY -m benchkit model --device cuda --size small medium large xl 2.7B \
  --context-length 256 --batch-size 4 --mode forward forward-backward --precision fp32 bf16 \
  --warmup 5 --steps 10 --out "$R/model_warmup"
step model_no_warmup 60 $PY -m benchkit model --device cuda --size small medium large xl 2.7B \
  --context-length 256 --batch-size 4 --mode forward forward-backward --precision fp32 \
  --warmup 0 --steps 10 --out "$R/model_no_warmup"
step memory 120 $PY -m benchkit memory --device cuda --size 2.7B --context-length 128 256 512 \
  --batch-size 4 --precision fp32 bf16 --out "$R/memory"
step profile 60 $PY -m benchkit profile --device cuda --size small --context-length 256 --batch-size 4 \
  --mode train-step --precision fp32 --warmup 5 --steps 5 --top 15 --out "$R/profile"
step mfu_xl_256 150 $PY -m benchkit model --device cuda --size xl --context-length 256 --batch-size 4 \
  --mode train-step --precision bf16 --attention flashattn2 --compile --warmup 5 --steps 10 --out "$R/mfu_xl_256"
step run 100 $PY -m benchkit run --device cuda --out "$R/run"
step mfu_xl_1024 150 $PY -m benchkit model --device cuda --size xl --context-length 1024 --batch-size 4 \
  --mode train-step --precision bf16 --attention flashattn2 --compile --warmup 5 --steps 10 --out "$R/mfu_xl_1024"

finish
