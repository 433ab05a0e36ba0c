#!/bin/bash
# benchkit model medium bf16 train step at context 4096, flashattn2 then SDPA, twice (gpu_pass.sh's model step)
for r in a b; do OUT=$OUT/$r bash packages/flashattn2/benchmarks/gpu_pass.sh model 2>&1 | grep -v Warning | tail -40; done
