#!/bin/bash
export PYTHONPATH=$PWD/packages/flashattn2/src
cd packages/flashattn2/benchmarks/scratch
AB_NAME=s15-qreg timeout 400 python ab_fwd.py gf_qreg gf_qglob 2>&1 | grep -v Warning
