# the GPU tests (verbose: which test runs last), then hopper_kernels.py's two tables
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
b=packages/flashattn2/benchmarks
nvidia-smi --query-gpu=name --format=csv,noheader
start=$(date +%s)
timeout 300 python -m pytest packages/flashattn2/tests -m gpu -n 4 -v -p no:cacheprovider --durations=12 -o faulthandler_timeout=150 > $OUT/2026-11-27-h100-s23-gpu-tests.log 2>&1
echo "tests rc=$? in $(( $(date +%s) - start )) s"; grep -E "passed|failed|error" $OUT/2026-11-27-h100-s23-gpu-tests.log | tail -3
timeout 150 python $b/hopper_kernels.py --kernel backward --out $OUT/2026-11-27-h100-s23-hopper-backward-by-shape.json | tail -3
timeout 170 python $b/hopper_kernels.py --kernel forward --out $OUT/2026-11-27-h100-s23-hopper-forward-by-shape.json | tail -3
