export PYTHONPATH=$PWD/packages/flashattn2/src
R=$PWD
cd packages/flashattn2/benchmarks/scratch
timeout 200 python ab_graph.py flashattn2._gluon_backward 2>&1 | grep "shape\|Error" | cut -c1-500
cp $OUT/ab_graph.json $OUT/ab_graph_final.json 2>/dev/null
cd $R
timeout 200 python -m pytest packages/flashattn2/tests -m gpu -n 4 -q 2>&1 | tail -2 | tee $OUT/gpu-tests.log
timeout 170 python packages/flashattn2/benchmarks/matrix.py --shapes '[[1,16,16,16384,64,true],[4,16,16,4096,128,true],[4,16,16,4096,128,false],[2,32,8,4096,128,true]]' --out $OUT/matrix.json 2>&1 | tail -14
