export PYTHONPATH=$PWD/packages/flashattn2/src
cd packages/flashattn2/benchmarks/scratch
timeout 150 python overlap.py gb_pdl gb_pdl_all 2>&1 | grep "module\|Error" | cut -c1-600
timeout 400 python ab_graph.py gb_pdl gb_pdl_all 2>&1 | grep "shape\|Error" | cut -c1-900
