#!/bin/bash
# Scratch GPU pass 6 (session 17): the package's forward (gf_new: overlap at D = 128, whole-slot release on v_empty
# elsewhere) against the previous one (gf_head); GPU tests; matrix.
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
SH='[[1,16,16,16384,64,true],[4,16,16,4096,64,false],[2,16,16,4096,64,true],[4,16,16,4096,128,false],[4,16,16,4096,128,true],[2,16,16,4096,256,true]]'
AB_NAME=v72-package-2 AB_SHAPES="$SH" timeout 200 python $S/ab_fwd.py gf_new 2>&1 | tail -6
OUT=$OUT timeout 560 bash packages/flashattn2/benchmarks/gpu_pass.sh tests matrix 2>&1 | tail -40
