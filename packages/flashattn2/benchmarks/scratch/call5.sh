set -u
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
for shape in '[1,16,16,2048,128,true]' '[4,16,16,1024,128,false]'; do
  timeout 60 python $S/micro_bwd.py $shape
  timeout 60 python $S/micro_bwd.py $shape
done 2>&1 | grep -v Warn | tee $OUT/micro.txt
