#!/usr/bin/env bash
# scratch: v121's forward in context, then the short and mid table of BENCHMARKS.md with the band's shapes
export PYTHONPATH=packages/flashattn2/src PYTHONUNBUFFERED=1
b=packages/flashattn2/benchmarks
timeout 150 python $b/scratch/fwd_context.py 2>&1 | tail -10
timeout 400 python $b/matrix.py --graph --shapes '[[1,16,16,2048,64,true],[2,16,16,2048,64,true],[1,16,16,4096,64,true],[2,16,16,1024,128,true],[1,16,16,2048,128,true],[1,16,4,2048,128,true],[1,8,8,4096,128,true],[1,4,4,8192,128,true],[1,8,8,2048,256,true],[4,16,16,1024,128,true],[8,16,16,1024,128,true],[16,16,16,1024,128,true],[8,32,8,1024,128,true],[8,16,16,2048,128,true],[4,16,16,2048,64,true],[16,16,16,1024,64,true],[4,16,16,1024,128,false],[2,16,16,2048,64,false],[2,16,16,1024,128,false],[4,16,16,512,128,false],[1,16,16,1024,64,false],[8,16,16,512,64,false]]' --out "$OUT/graph-short-mid.json" 2>&1 | tail -48
