#!/bin/bash
# Scratch GPU pass 3 (session 17): ncu launch statistics, pipes and instruction mix of flashattn2's and cuDNN's
# forward and backward kernels at (4, 16, 4096, 128) non-causal.
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
timeout 400 ncu -k 'regex:fprop|bprop|_hopper_forward_kernel|_hopper_backward_kernel' --launch-skip 4 -c 4 \
  --section LaunchStats --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
  --section MemoryWorkloadAnalysis --section Occupancy \
  --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed_pipe_xu.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed.sum,sm__cycles_elapsed.avg,smsp__sass_inst_executed_op_shared_ld.sum,smsp__sass_inst_executed_op_shared_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed_pipe_uniform.sum,smsp__inst_executed_pipe_fmaheavy.sum,smsp__inst_executed_pipe_fmalite.sum \
  -f -o /tmp/rep python $S/ncu_both.py > $OUT/ncu_run.log 2>&1; echo ncu rc=$?; tail -3 $OUT/ncu_run.log
ncu -i /tmp/rep.ncu-rep --page details > $OUT/ncu_details.txt 2>&1
ncu -i /tmp/rep.ncu-rep --page raw --csv > $OUT/ncu_raw.csv 2>&1
grep -E "^  [a-zA-Z_]|Block Size|Grid Size|Registers Per|Shared Memory Config|Dynamic Shared|Duration|Elapsed Cycles|SM Frequency|Executed Ipc A|Issue Slots Busy|Tensor|Executed Instructions  |hmma|pipe_xu|pipe_fma |pipe_alu|inst_executed.sum|wavefronts|Achieved Occ|Theoretical Occ|Waves Per" $OUT/ncu_details.txt | head -150
