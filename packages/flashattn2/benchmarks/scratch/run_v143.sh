#!/usr/bin/env bash
# v143: ncu of the headline's kernels (forward and backward) beside cuDNN's; launch stats of cuDNN's at short shapes.
set -uo pipefail
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv | tee $OUT/gpu.txt
python -c "import torch, triton; print(torch.__version__, triton.__version__, torch.backends.cudnn.version())" | tee -a $OUT/gpu.txt
# warm Triton's cache outside ncu
for shape in "1 16 16384 64" "8 16 1024 64" "8 16 1024 128"; do python $S/ncu_pass.py $shape causal fwdbwd; done
m=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum,sm__inst_executed_pipe_xu.sum,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active
timeout 280 ncu -k 'regex:hopper_forward|hopper_backward|fprop|bprop' --metrics $m --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
  python $S/ncu_pass.py 1 16 16384 64 causal fwdbwd > $OUT/ncu-headline.txt 2>&1
grep -E "^  [a-z_]|hmma|sm__cycles_elapsed|inst_executed|lts__t_bytes|pipe_xu|pipe_shared|Stall|Warp Cycles Per Issued|Registers Per|Grid Size|Block Size|Shared Memory Config|Dynamic Shared" $OUT/ncu-headline.txt | head -120
for d in 64 128; do
  timeout 120 ncu --section LaunchStats --section SpeedOfLight --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg \
    python $S/ncu_pass.py 8 16 1024 $d causal fwdbwd > $OUT/ncu-short-d$d.txt 2>&1
  grep -E "^  [a-zA-Z_]|hmma|sm__cycles_elapsed|Duration|Registers Per|Grid Size|Block Size|Dynamic Shared|Threads" $OUT/ncu-short-d$d.txt | head -80
done
