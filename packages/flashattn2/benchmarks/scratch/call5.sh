set -uo pipefail
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
b=packages/flashattn2/benchmarks
timeout 200 python $b/matrix.py --graph --shapes '[[4,16,16,1024,128,true],[8,16,16,1024,128,true],[16,16,16,1024,128,true],[8,32,8,1024,128,true],[8,16,16,2048,128,true],[16,16,16,1024,64,true],[8,16,16,1024,128,false]]' --out $OUT/matrix_graph_train.json 2>&1 | grep -v Warn
GROUPS=1,2,4,8 ROUNDS=5 SHAPES='[[2,16,1024,128],[4,16,1024,128],[8,16,1024,128],[1,16,2048,128],[2,16,2048,128],[4,16,2048,128],[2,16,1024,256],[4,16,1024,256]]' timeout 300 python $b/scratch/ticket.py 2>&1 | grep -v Warn
