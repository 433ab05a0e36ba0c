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
set -u
: "${OUT:?set OUT to the folder that receives the results}"
BUDGET_S=${BUDGET_S:-520}  # the device allows 600 s per command; keep room for bundling
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python}
OUT=$(mkdir -p "$OUT" && cd "$OUT" && pwd)  # absolute: bundle() changes directory
WORK=$(mktemp -d)
mkdir -p "$WORK/results"
START=$(date +%s)

{
  echo "# benchkit GPU pass"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- git: $(git describe --always --dirty 2>/dev/null || echo unknown)"
  echo "- device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
  echo "- software: $($PY -c 'import torch, triton; print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, triton {triton.__version__}")' 2>&1)"
} > "$OUT/summary.md"

bundle() {
  (cd "$WORK" && find results -type f ! -name '*.pickle' ! -name 'trace.json' -print0 \
     | tar czf "$OUT/results.tar.gz" --null -T -)
  (cd "$WORK" && find results -type f \( -name '*.pickle' -o -name 'trace.json' \) -print0 \
     | tar czf "$OUT/traces.tar.gz" --null -T -)
}

# step NAME LIMIT_S COMMAND...: run COMMAND with at most LIMIT_S seconds (less if the
# budget is nearly spent); its stdout goes into summary.md, its stderr into the log.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$(( START + BUDGET_S - $(date +%s) ))
  (( limit > left )) && limit=$left
  {
    echo
    echo "## $name"
    echo
    echo "\`${*//$WORK\//}\`"
    echo
  } >> "$OUT/summary.md"
  if (( limit < 10 )); then
    echo "skipped: the time budget is spent" >> "$OUT/summary.md"
    return
  fi
  local began=$(date +%s)
  echo "=== $name: $*" >> "$OUT/gpu_pass.log"
  timeout "$limit" "$@" > "$WORK/stdout.txt" 2> "$WORK/stderr.txt"
  local rc=$?
  cat "$WORK/stderr.txt" >> "$OUT/gpu_pass.log"
  {
    echo "exit status $rc$( ((rc == 124)) && echo " (stopped at its ${limit} s limit)"), $(( $(date +%s) - began )) s"
    echo
    echo '```'
    cat "$WORK/stdout.txt"
    if (( rc != 0 )); then
      echo "--- last lines of stderr ---"
      tail -n 15 "$WORK/stderr.txt"
    fi
    echo '```'
  } >> "$OUT/summary.md"
  bundle
}

R=$WORK/results
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

echo >> "$OUT/summary.md"
echo "total: $(( $(date +%s) - START )) s" >> "$OUT/summary.md"
ls -l "$OUT" >> "$OUT/gpu_pass.log"
rm -rf "$WORK"
