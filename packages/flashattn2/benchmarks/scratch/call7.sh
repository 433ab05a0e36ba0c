set -u
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
B=packages/flashattn2/benchmarks
for shape in '[1,16,16,2048,128,true]' '[4,16,16,1024,128,false]'; do timeout 60 python $S/micro_ab.py $shape 2>&1 | grep -v Warn; done | tee $OUT/micro-ab.txt
bash $B/gpu_pass.sh matrix host first
timeout 200 python $B/matrix.py --shapes '[[2,16,16,1024,128,true],[4,16,16,1024,128,false],[4,16,16,2048,64,true],[1,16,16,2048,128,true],[2,16,16,2048,64,false]]' --out $OUT/mid.json 2>&1 | grep -v Warn | tail -12
