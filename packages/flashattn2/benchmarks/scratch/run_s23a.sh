# host time of the Hopper launchers (TmaDescriptor against from_tensor), then the Hopper/Triton boundary, then the GPU tests
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
s=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 python $s/host_ab.py 2>&1 | tail -15
timeout 200 python $s/short3.py 2>&1 | sed 's/0\.\([0-9]\{4\}\)[0-9]*/0.\1/g' | tail -30
timeout 280 python -m pytest packages/flashattn2/tests -m gpu -n 4 -q -p no:cacheprovider -o faulthandler_timeout=200 2>&1 | tee $OUT/2026-11-27-h100-s23-gpu-tests-a.log | tail -4
