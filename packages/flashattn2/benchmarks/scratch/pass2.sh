#!/bin/bash
# Scratch GPU pass 2 (session 13): the forward's row reductions as trees (max only; max and sum) against the package's.
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
S=packages/flashattn2/benchmarks/scratch
AB_NAME=ab_tree timeout 300 python $S/ab_fwd.py gf_treemax gf_tree 2>&1 | tail -12
