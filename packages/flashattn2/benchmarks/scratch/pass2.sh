set -u
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
echo "=== variants $(date +%T)"; timeout 300 python $S/variants.py 1,9,17,25 2>&1 | tee $OUT/variants2.log | grep -v Warning | tail -40
echo "=== tests $(date +%T)"
FA2_EXPERIMENT=25 timeout 240 python -m pytest packages/flashattn2/tests -m gpu -n 4 -q -p no:cacheprovider 2>&1 | tail -8 | tee $OUT/tests25.log
echo "=== done $(date +%T)"
