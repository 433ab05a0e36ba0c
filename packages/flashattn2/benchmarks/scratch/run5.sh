export PYTHONPATH=$PWD/packages/flashattn2/src
R=$PWD
cd packages/flashattn2/benchmarks/scratch
AB_NO_TIME=1 timeout 120 python ab_epi.py gb_new gb_new_c 2>&1 | grep "shape\|Error" | python -c "
import sys, ast
for l in sys.stdin:
    try: r = ast.literal_eval(l)
    except Exception: print(l[:300]); continue
    print(r['shape'], r['causal'], 'equal', r['equal_gb_new'], r['equal_gb_new_c'], 'err', [round(x, 6) for x in r['err_old']], [round(x, 6) for x in r['err_gb_new']])
"
timeout 120 python overlap.py gb_new gb_new_c 2>&1 | grep "module\|Error" | cut -c1-400
timeout 240 python ab_graph.py gb_new gb_new_c 2>&1 | grep "shape\|Error" | cut -c1-600
cp $OUT/*.json . 2>/dev/null
cd $R && timeout 200 python -m pytest packages/flashattn2/tests -m gpu -n 4 -q -x 2>&1 | tail -3
