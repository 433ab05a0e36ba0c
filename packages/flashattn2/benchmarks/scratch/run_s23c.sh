# the GPU tests on the final code, then the forward at 512 keys (head dims 128 and 256)
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
start=$(date +%s)
timeout 300 python -m pytest packages/flashattn2/tests -m gpu -n 4 -v -p no:cacheprovider --durations=5 -o faulthandler_timeout=150 > $OUT/2026-11-27-h100-s23-gpu-tests-final.log 2>&1
echo "tests rc=$? in $(( $(date +%s) - start )) s"; grep -E "passed|failed|error" $OUT/2026-11-27-h100-s23-gpu-tests-final.log | tail -3
timeout 100 python packages/flashattn2/benchmarks/scratch/short4.py 2>&1 | sed 's/0\.\([0-9]\{4\}\)[0-9]*/0.\1/g' | tail -8
