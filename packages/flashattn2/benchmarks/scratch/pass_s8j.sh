#!/bin/bash
# Scratch GPU pass (session 8): the deterministic chain's hop (run_v30d.py).
export PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src
timeout 400 python packages/flashattn2/benchmarks/scratch/run_v30d.py 2>&1 | grep "^{"; echo rc=$?
