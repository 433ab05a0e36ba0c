#!/bin/bash
# session 22, call 1: the persistent non-causal forward against the package's (gf_head), and the prologue's variants
export PYTHONPATH=$PWD/packages/flashattn2/src
cd packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv
python -c "import torch, triton; print(torch.__version__, triton.__version__, torch.backends.cudnn.version())"
AB_ROUNDS=7 AB_NAME=2026-11-27-h100-s22-v89-persistent-forward AB_SHAPES='[[2,5,5,1000,128,false],[1,4,2,777,64,false],[3,4,4,2200,128,false],[4,16,16,4096,128,false],[4,16,16,4096,64,false],[1,16,16,16384,128,false],[2,16,16,8192,128,false],[2,32,8,4096,128,false],[8,16,16,1024,128,false],[4,16,16,4096,128,true],[1,16,16,16384,64,true]]' timeout 300 python ab_fwd.py gf_pers 2>&1 | grep -v Warning | tail -14
timeout 200 python prologue.py 2>&1 | tail -8
cp prologue.json $OUT/2026-11-27-h100-s22-v90-prologue.json 2>/dev/null
cp $OUT/*.json . 2>/dev/null; ls $OUT
