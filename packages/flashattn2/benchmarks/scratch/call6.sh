set -u
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
echo "=== micro $(date +%T)"
for shape in '[1,16,16,2048,128,true]' '[4,16,16,1024,128,false]'; do timeout 60 python $S/micro_bwd.py $shape 2>&1 | grep -v Warn; done | tee $OUT/micro.txt
echo "=== ab $(date +%T)"
for i in 1 2; do for m in new old; do timeout 80 python $S/ab_expand.py $m; done; done 2>&1 | grep -v Warn | tee $OUT/ab-expand.jsonl
echo "=== tests $(date +%T)"
timeout 220 python -m pytest packages/flashattn2/tests -m gpu -n 4 -v -p no:cacheprovider -o faulthandler_timeout=150 > $OUT/tests.log 2>&1; tail -3 $OUT/tests.log
echo "=== end $(date +%T)"
