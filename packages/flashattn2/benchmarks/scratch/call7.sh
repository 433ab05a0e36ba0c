set -uo pipefail
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
b=packages/flashattn2/benchmarks
timeout 150 python $b/hopper_kernels.py --kernel backward --graph --shapes '[[[1,16,1024,64],false],[[2,16,1024,64],false],[[8,16,512,64],false],[[4,16,512,64],false],[[1,8,1024,64],false],[[1,16,1024,128],false],[[4,16,512,128],false],[[2,16,1024,128],false],[[2,16,512,128],false]]' --out $OUT/bwd_full_graph.json 2>&1 | grep -v Warn
timeout 150 python $b/hopper_kernels.py --kernel forward --graph --shapes '[[[8,16,1024,64],true],[[16,16,1024,64],true],[[32,16,1024,64],true],[[64,16,1024,64],true],[[32,16,512,64],true],[[64,16,512,64],true]]' --out $OUT/fwd64_graph.json 2>&1 | grep -v Warn
timeout 150 python $b/matrix.py --graph --shapes '[[2,16,16,1024,128,false],[1,16,16,1024,64,false],[8,16,16,512,64,false],[4,16,16,512,128,false]]' --out $OUT/matrix_full_graph.json 2>&1 | grep -v Warn
