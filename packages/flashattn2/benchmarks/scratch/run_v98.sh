# v98 on the GPU: the A/B (under a timeout: a wrong schedule hangs), then the Hopper-against-Triton backward table
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 300 python packages/flashattn2/benchmarks/scratch/ab_v98.py 2>&1 | tail -16
timeout 240 python packages/flashattn2/benchmarks/hopper_kernels.py --kernel backward --out $OUT/2026-11-27-h100-s24-v98-hopper-backward.json 2>&1 | tail -36
