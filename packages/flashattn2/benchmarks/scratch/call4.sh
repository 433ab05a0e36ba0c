set -u
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
shape='[1,16,16,2048,128,true]'
{
timeout 90 python $S/host_threads.py $shape
FLASHATTN2_HOPPER_BACKWARD=0 timeout 90 python $S/host_threads.py $shape
FLASHATTN2_HOPPER_FORWARD=0 timeout 90 python $S/host_threads.py $shape
FLASHATTN2_BACKGROUND_COMPILE=0 timeout 90 python $S/host_threads.py $shape
} 2>&1 | grep -v Warn > $OUT/host_threads.txt
grep "ms/call" $OUT/host_threads.txt
