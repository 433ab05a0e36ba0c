#!/usr/bin/env bash
# scratch: which kernels should run at mid shapes, by GPU time (replays) and eager time
set -uo pipefail
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
b=packages/flashattn2/benchmarks
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
BWD='[[[1,16,1024,128],true],[[2,16,1024,128],true],[[4,16,1024,128],true],[[8,16,1024,128],true],[[1,16,2048,128],true],[[2,16,2048,128],true],[[4,16,2048,128],true],[[2,16,1024,128],false],[[4,16,1024,128],false],[[1,16,2048,128],false],[[2,16,2048,128],false],[[2,16,1024,64],true],[[4,16,1024,64],true],[[8,16,1024,64],true],[[1,16,2048,64],true],[[2,16,2048,64],true],[[4,16,2048,64],true],[[2,16,1024,64],false],[[4,16,1024,64],false],[[2,16,2048,64],false]]'
FWD='[[[4,16,1024,64],true],[[8,16,1024,64],true],[[2,16,1024,64],true],[[1,16,2048,64],true],[[2,16,2048,64],true],[[4,16,512,64],false],[[8,16,512,64],false],[[2,16,512,128],true],[[4,16,512,128],true],[[2,16,1024,128],true]]'
timeout 200 python $b/hopper_kernels.py --kernel backward --graph --shapes "$BWD" --out $OUT/bwd_graph.json
timeout 150 python $b/hopper_kernels.py --kernel backward --shapes "$BWD" --out $OUT/bwd_eager.json
timeout 100 python $b/hopper_kernels.py --kernel forward --graph --shapes "$FWD" --out $OUT/fwd_graph.json
timeout 120 python $b/matrix.py --graph --shapes '[[2,16,16,1024,128,true],[4,16,16,1024,128,false],[4,16,16,2048,64,true],[1,16,16,2048,128,true],[2,16,16,2048,64,false]]' --out $OUT/matrix_graph.json
