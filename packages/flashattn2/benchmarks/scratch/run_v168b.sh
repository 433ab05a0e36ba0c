#!/usr/bin/env bash
# scratch (v168b): Triton 3.9's files travel as zstd parts in .t390a, .t390b (one a call; STASH=1 stops after
# gathering them in /tmp/t390). Then the package with the short causal backward tiles:
# matrix.py --graph at four short causal shapes under 3.6 and 3.9, and the GPU tests under 3.6.
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
B=packages/flashattn2/benchmarks
export PYTHONUNBUFFERED=1
in36() { PYTHONPATH=packages/flashattn2/src:$B TRITON_CACHE_DIR=/tmp/tc36 "$@"; }
in39() { PYTHONPATH=packages/flashattn2/src:$B:/tmp/site$V TRITON_CACHE_DIR=/tmp/tc39 TRITON_BACKENDS_IN_TREE=1 "$@"; }
quiet() { grep -v "^\s*$" | grep -v "leaked\|nanobind"; }
SHAPES='[[8,16,16,1024,64,true],[32,16,16,512,64,true],[4,16,16,1024,64,true],[64,16,16,256,64,true]]'
for T in 36 39; do
  echo "=== matrix --graph $T $(date +%T)"
  in$T timeout 150 python3 $B/matrix.py --graph --shapes "$SHAPES" --out $OUT/matrix-graph-$T.json 2>&1 | quiet
done
echo "=== tests 36 $(date +%T)"
in36 timeout 240 python3 -m pytest packages/flashattn2/tests -m gpu -n 4 -q -p no:cacheprovider \
  -o faulthandler_timeout=150 2>&1 | tee $OUT/tests-36.log | tail -4
