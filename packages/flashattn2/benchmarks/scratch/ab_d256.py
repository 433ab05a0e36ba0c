"""A/B of head-dim-256 Hopper backward variants (scratch modules named on the command line) against the package:
bitwise equality with the package's dq, dk, dv, and the whole backward's time (prologue, kernel, epilogue),
do_bench medians in 5 alternating rounds, ratios to the package. Writes $OUT/ab-d256.json.
Run from the repository root: PYTHONPATH=packages/flashattn2/src python .../scratch/ab_d256.py gb_early ..."""

import importlib
import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashattn2._gluon_backward as package
from flashattn2._triton_forward import triton_forward

variants = {"package": package, **{name: importlib.import_module(name) for name in sys.argv[1:]}}
out_path = os.path.join(os.environ.get("OUT", "."), "ab-d256.json")
rows = []
for b, h, hk, n, causal in [
    (2, 16, 16, 4096, True),
    (2, 16, 16, 4096, False),
    (1, 16, 16, 8192, True),
    (4, 8, 8, 2048, True),
    (4, 16, 16, 2048, False),
    (8, 16, 16, 1024, True),
    (3, 4, 2, 4500, True),
    (2, 4, 2, 2100, False),
]:
    d = 256
    q, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(b, hk, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    o, lse = triton_forward(q, k, v, causal, d**-0.5)
    fns, outs = {}, {}
    for name, module in variants.items():
        hb = module.HopperBackward(q.shape, k.shape, o.stride(), g.stride(), q.dtype, q.device, causal, d**-0.5)
        res = (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v))
        fns[name] = lambda hb=hb, res=res: hb(g, q, k, v, o, lse, *res)
        fns[name]()
        torch.cuda.synchronize()
        outs[name] = [x.clone() for x in res]
    samples = {name: [] for name in fns}
    for r in range(5):
        for name in list(fns) if r % 2 == 0 else list(fns)[::-1]:
            samples[name].append(triton.testing.do_bench(fns[name], warmup=25, rep=150, return_mode="median"))
    row = {"shape": (b, h, hk, n, d, causal), "ms": {k_: round(statistics.median(t), 4) for k_, t in samples.items()}}
    for name in list(variants)[1:]:
        row[f"{name}/package"] = round(statistics.median(a / c for a, c in zip(samples[name], samples["package"])), 4)
        row[f"{name} bitwise"] = all(torch.equal(x, y) for x, y in zip(outs["package"], outs[name]))
    print(row, flush=True)
    rows.append(row)
    with open(out_path, "w") as f:
        json.dump(rows, f, indent=1)
