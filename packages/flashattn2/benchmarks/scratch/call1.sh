set -u
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
echo "=== timeline $(date +%T)"
for m in on off; do timeout 60 python $S/timeline.py $m '[1,16,16,2048,128,true]' flashattn2 $OUT/tl-causal-$m > $OUT/tl-causal-$m.txt 2>&1; tail -3 $OUT/tl-causal-$m.txt; done
timeout 60 python $S/timeline.py on '[4,16,16,1024,128,false]' flashattn2 $OUT/tl-full > $OUT/tl-full.txt 2>&1
timeout 60 python $S/timeline.py on '[4,16,16,1024,128,false]' cudnn $OUT/tl-full-cudnn > $OUT/tl-full-cudnn.txt 2>&1
rm -f $OUT/*.trace.json.gz
echo "=== ab eager $(date +%T)"
for i in 1 2; do for m in on off; do timeout 100 python $S/ab_pdl.py $m | tee -a $OUT/ab-eager.jsonl; done; done
echo "=== ab graph $(date +%T)"
for m in on off; do timeout 80 python $S/ab_pdl.py $m --graph | tee -a $OUT/ab-graph.jsonl; done
echo "=== tests $(date +%T)"
timeout 200 python -m pytest packages/flashattn2/tests -m gpu -n 4 -v -p no:cacheprovider -o faulthandler_timeout=150 > $OUT/tests.log 2>&1; tail -3 $OUT/tests.log
echo "=== end $(date +%T)"
