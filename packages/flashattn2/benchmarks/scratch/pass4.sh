#!/bin/bash
# Scratch GPU pass 4 (session 13): the Triton forward's tiles at short D = 64 shapes; the Hopper forward's register split.
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
timeout 240 python $S/fwd_tiles_short.py 2>&1 | tail -13
AB_NAME=ab_regs timeout 240 python $S/ab_fwd.py gf_r216 gf_r224 2>&1 | tail -10
