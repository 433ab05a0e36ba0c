# Shared by gpu_pass.sh and multi_gpu_pass.sh (source it; do not run it): a time
# budget, and step(), which runs one command under its share of that budget and
# rebuilds the files in $OUT after every step, so that a pass cut short still
# returns what it finished. The caller sets PASS_TITLE (and BUDGET_S, if not 520);
# ONLY="name name ..." in the environment runs just those steps.
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
  echo "# ${PASS_TITLE:-benchkit GPU pass}"
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
  [[ -n "${ONLY:-}" && " $ONLY " != *" $name "* ]] && return
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

# finish: the total wall time, the file list, and the scratch folder removed.
finish() {
  echo >> "$OUT/summary.md"
  echo "total: $(( $(date +%s) - START )) s" >> "$OUT/summary.md"
  ls -l "$OUT" >> "$OUT/gpu_pass.log"
  rm -rf "$WORK"
}
