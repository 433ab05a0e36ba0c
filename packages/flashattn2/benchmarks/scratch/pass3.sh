#!/bin/bash
export PYTHONPATH=$PWD/packages/flashattn2/src
cd packages/flashattn2/benchmarks/scratch
AB_NAME=s15-cluster3 AB_SHAPES='[[1,2,2,512,128,false],[4,16,16,4096,128,false],[1,16,16,16384,128,false],[2,32,8,4096,128,false],[2,16,16,4096,64,false]]' timeout 300 python ab_cluster.py gf_cluster3 gf_cluster gf_clonly gf_loader4 2>&1 | grep -v Warning
