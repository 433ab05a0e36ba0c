#!/usr/bin/env bash
# scratch (v167): Triton 3.9's files travel as zstd parts in .t390a, .t390b (one a call; STASH=1 stops after
# gathering them in /tmp/t390). Then: bwd_probe.py under 3.6, 3.9 and 3.9 with 3.6's ptxas, three alternating
# rounds of processes; ab_bar.py under 3.9.
set -uo pipefail
: "${OUT:?}"
V=390
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
chmod +x /tmp/site$V/triton/backends/nvidia/bin/*
SYS_PTXAS=$(python3 -c 'import triton, os; print(os.path.dirname(triton.__file__))')/backends/nvidia/bin/ptxas
$SYS_PTXAS --version | tail -1; /tmp/site$V/triton/backends/nvidia/bin/ptxas-blackwell --version | tail -1
S=packages/flashattn2/benchmarks/scratch
export PYTHONUNBUFFERED=1
run() {
  case $1 in
    t36) PYTHONPATH=packages/flashattn2/src TRITON_CACHE_DIR=/tmp/tc36 timeout 200 python3 $S/bwd_probe.py t36 ;;
    t39) PYTHONPATH=packages/flashattn2/src:/tmp/site$V TRITON_CACHE_DIR=/tmp/tc39 TRITON_BACKENDS_IN_TREE=1 \
      timeout 200 python3 $S/bwd_probe.py t39 ;;
    t39p) PYTHONPATH=packages/flashattn2/src:/tmp/site$V TRITON_CACHE_DIR=/tmp/tc39p TRITON_BACKENDS_IN_TREE=1 \
      TRITON_PTXAS_BLACKWELL_PATH=$SYS_PTXAS timeout 200 python3 $S/bwd_probe.py t39p ;;
  esac 2>&1 | grep -v "^\s*$" | grep -v nanobind | grep -v "leaked" | tee -a $OUT/probe.log
}
for order in "t36 t39 t39p" "t39p t39 t36" "t36 t39 t39p"; do
  for c in $order; do echo "=== $c $(date +%T)" | tee -a $OUT/probe.log; run $c; done
done
echo "=== ab_bar $(date +%T)"
PYTHONPATH=packages/flashattn2/src:/tmp/site$V TRITON_CACHE_DIR=/tmp/tc39 TRITON_BACKENDS_IN_TREE=1 OUT=$OUT \
  timeout 150 python3 $S/ab_bar.py 2>&1 | grep -v "^\s*$" | grep -v "leaked\|nanobind" | tee $OUT/ab_bar.log
