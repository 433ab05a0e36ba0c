#!/usr/bin/env bash
# The GPU pass under another Triton release on a machine with torch 2.11 and Triton 3.6. The release's package
# (libtriton stripped of its local symbols; cupti, proton and the Blackwell ptxas left out) travels as
# .whl/site$V.tar.xz, is unpacked to /tmp/site$V and put first on PYTHONPATH.
# V: 371, 380 or 390. STEPS: gpu_pass.sh's steps (default: tests matrix host).
set -uo pipefail
: "${OUT:?}" "${V:?}"
mkdir -p /tmp/site$V && tar xJf .whl/site$V.tar.xz -C /tmp/site$V || exit 1
export PYTHONPATH=/tmp/site$V TRITON_CACHE_DIR=/tmp/tc$V
python3 -c "import triton, torch; print(triton.__version__, triton.__file__, torch.__version__)" || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
OUT=$OUT/t$V bash packages/flashattn2/benchmarks/gpu_pass.sh ${STEPS:-tests matrix host}
