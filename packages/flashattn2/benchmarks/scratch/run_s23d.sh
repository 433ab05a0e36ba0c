# reproduce the GPU-test timeout seen after benchmark scripts: a benchmark first, then the tests with -v and
# faulthandler dumps; a watchdog lists the processes if the tests run long
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
timeout 100 python packages/flashattn2/benchmarks/scratch/short4.py > /dev/null 2>&1
start=$(date +%s)
( sleep 200; echo "=== watchdog at 200 s"; ps -eo pid,etimes,pcpu,rss,args --sort=-pcpu | grep -v grep | grep -E "python|compile" | head -30 | cut -c1-200; nvidia-smi --query-compute-apps=pid,used_memory --format=csv ) > $OUT/watchdog.txt 2>&1 &
timeout 290 python -m pytest packages/flashattn2/tests -m gpu -n 4 -v -p no:cacheprovider -o faulthandler_timeout=90 > $OUT/2026-11-27-h100-s23-gpu-tests-after-bench.log 2>&1
echo "tests rc=$? in $(( $(date +%s) - start )) s"; grep -E "passed|failed|error" $OUT/2026-11-27-h100-s23-gpu-tests-after-bench.log | tail -2
grep -n "PASSED" $OUT/2026-11-27-h100-s23-gpu-tests-after-bench.log | tail -3 | cut -c1-160
grep -n "Timeout\|most recent call first" $OUT/2026-11-27-h100-s23-gpu-tests-after-bench.log | head
