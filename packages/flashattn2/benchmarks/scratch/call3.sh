set -u
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
for shape in '[1,16,16,2048,128,true]' '[4,16,16,1024,128,false]'; do
    timeout 60 python $S/host_mid.py $shape flashattn2
    FLASHATTN2_HOPPER_BACKWARD=0 timeout 60 python $S/host_mid.py $shape flashattn2
    timeout 60 python $S/host_mid.py $shape cudnn
done 2>&1 | tee $OUT/host_mid.txt | grep -v Warn
