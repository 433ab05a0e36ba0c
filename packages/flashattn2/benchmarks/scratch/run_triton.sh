#!/usr/bin/env bash
# The GPU pass under another Triton release on a machine with torch 2.11 and Triton 3.6: the release's files
# travel as zstd parts in folders .t${V}a, .t${V}b, ... one a call (each call gathers what it carries in /tmp/t$V;
# STASH=1 stops there), are joined, unpacked to /tmp/site$V (once per machine) and put first on PYTHONPATH.
# AB=1 runs ab_local_wait.py first; STEPS: gpu_pass.sh's steps (default: tests matrix host first).
set -uo pipefail
: "${OUT:?}" "${V:?}"
mkdir -p /tmp/t$V && for d in .t$V?; do [ -d $d ] && cp $d/* /tmp/t$V/; done
ls -la /tmp/t$V; [ "${STASH:-0}" = 1 ] && exit 0
if [ ! -d /tmp/site$V/triton ]; then
  cat /tmp/t$V/triton$V.part0* > /tmp/t$V/t.tar.zst && sha256sum /tmp/t$V/t.tar.zst
  mkdir -p /tmp/site$V
  python3 -m pip install -q --no-index --no-deps --target /tmp/zs /tmp/t$V/zstandard-*.whl
  PYTHONPATH=/tmp/zs python3 -c "
import tarfile, zstandard
with open('/tmp/t$V/t.tar.zst', 'rb') as f:
    tarfile.open(fileobj=zstandard.ZstdDecompressor(max_window_size=2**31).stream_reader(f), mode='r|').extractall('/tmp/site$V')
"
fi
chmod +x /tmp/site$V/triton/backends/nvidia/bin/*  # the wheel was unpacked without its modes
export PYTHONPATH=/tmp/site$V TRITON_CACHE_DIR=/tmp/tc$V TRITON_BACKENDS_IN_TREE=1  # the amd backend is not carried
python3 -c "import triton, torch; print(triton.__version__, triton.__file__, torch.__version__)" || exit 1
mkdir -p $OUT/t$V
if [ "${AB:-0}" = 1 ]; then
  OUT=$OUT/t$V PYTHONPATH=packages/flashattn2/src:$PYTHONPATH timeout 300 python3 \
    packages/flashattn2/benchmarks/scratch/ab_local_wait.py 2>&1 | tee $OUT/t$V/ab.log | grep -v "^\s*$" | tail -12
fi
OUT=$OUT/t$V bash packages/flashattn2/benchmarks/gpu_pass.sh ${STEPS:-tests matrix host first}
