set -uo pipefail
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
b=packages/flashattn2/benchmarks
timeout 250 python $b/tiles.py --shape 8 16 1024 128 --causal --kernels dq dkdv --extra-dkdv 128,64,8,2 64,128,8,2 128,64,8,3 128,32,8,2 --extra-dq 128,128,8,2 64,128,8,2 128,32,8,2 --out $OUT/tiles128short.json 2>&1 | grep -v Warn
timeout 150 python $b/tiles.py --shape 16 16 1024 64 --causal --kernels forward --extra-forward 128,128,8,2 64,128,4,2 --out $OUT/tiles64fwd.json 2>&1 | grep -v Warn
