#!/bin/bash
# Session 15, pass 2: the Hopper forward with K and V multicast across 2-block clusters (gf_cluster) against gf_head.
export PYTHONPATH=$PWD/packages/flashattn2/src
cd packages/flashattn2/benchmarks/scratch
AB_NAME=s15-cluster-smoke AB_SHAPES='[[1,2,2,512,128,false]]' timeout 120 python ab_cluster.py gf_cluster 2>&1 | grep -v Warning
echo "smoke rc=$?"
AB_NAME=s15-cluster timeout 300 python ab_cluster.py gf_cluster 2>&1 | grep -v Warning
ls $OUT
