set -u
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv | tee $OUT/gpu.txt
echo "=== sass $(date +%T)"; timeout 150 python $S/sass_stats.py > $OUT/sass.log 2>&1; tail -5 $OUT/sass.log
echo "=== variants $(date +%T)"; timeout 260 python $S/variants.py 0,1,2,3,7 2>&1 | tee $OUT/variants.log | grep -v Warning | tail -40
echo "=== ncu $(date +%T)"
timeout 150 ncu --target-processes all -k "regex:_forward_kernel|_dq_kernel|_dkdv_kernel" \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section LaunchStats --section InstructionStats \
  python $S/ncu_one.py 1,16,8192,64,1,0 1,16,8192,64,1,3 4,16,4096,128,0,0 4,16,4096,128,0,3 > $OUT/ncu.txt 2>&1
tail -3 $OUT/ncu.txt
timeout 90 ncu --target-processes all -k "regex:_forward_kernel|_dq_kernel|_dkdv_kernel" \
  --metrics sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_issued.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed \
  python $S/ncu_one.py 1,16,8192,64,1,0 1,16,8192,64,1,3 4,16,4096,128,0,0 4,16,4096,128,0,3 > $OUT/ncu_metrics.txt 2>&1
tail -30 $OUT/ncu_metrics.txt
echo "=== done $(date +%T)"
