# next session: the persistent causal backward against the package (bitwise, time), under a timeout (a wrong
# schedule hangs); OUT set by the device tool
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 400 python packages/flashattn2/benchmarks/scratch/ab_pc.py 2>&1 | tail -12
