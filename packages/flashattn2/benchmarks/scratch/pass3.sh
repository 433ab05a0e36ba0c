#!/bin/bash
# Scratch GPU pass 3 (session 13): short causal forwards' GPU time by kernel and tile; clock and power of the forward alone.
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
timeout 300 python $S/fwd_short.py 2>&1 | tail -12
timeout 60 python $S/clocks_fwd.py 2>&1 | tail -10
