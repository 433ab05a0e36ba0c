"""Scratch: the Hopper backward with K's and V's views rebuilt every step (gb_views_per_step.py, the package as tried) against the views fixed
before the loop (gb_prev.py, beb0c38's module), whole backward, 5 alternating rounds; outputs compared bitwise."""
import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(__file__))
import gb_prev as old

import gb_views_per_step as new
from flashattn2._triton_forward import triton_forward

SHAPES = [
    ((4, 16, 4096, 128), 16, False),
    ((4, 16, 4096, 128), 16, True),
    ((2, 32, 4096, 128), 8, True),
    ((8, 16, 2048, 128), 16, True),
    ((1, 16, 16384, 128), 16, False),
    ((1, 16, 16384, 64), 16, True),
    ((4, 16, 4096, 64), 16, False),
    ((4, 16, 4096, 64), 16, True),
]
rows = []
for shape, kv, causal in SHAPES:
    torch.manual_seed(0)
    q, g = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(shape[0], kv, *shape[2:], device="cuda", dtype=torch.bfloat16) for _ in range(2))
    scale = shape[-1] ** -0.5
    out, lse = triton_forward(q, k, v, causal, scale)
    fns, res = {}, {}
    for name, mod in (("old", old), ("new", new)):
        hb = mod.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, scale)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        fns[name] = lambda hb=hb, dq=dq, dk=dk, dv=dv: hb(g, q, k, v, out, lse, dq, dk, dv)
        fns[name]()
        res[name] = [x.clone() for x in (dq, dk, dv)]
    equal = all(torch.equal(a, b) for a, b in zip(res["old"], res["new"]))
    samples = {"old": [], "new": []}
    for r in range(5):
        for name in ("old", "new") if r % 2 == 0 else ("new", "old"):
            samples[name].append(triton.testing.do_bench(fns[name], return_mode="median"))
    row = {"shape": shape, "kv_heads": kv, "causal": causal, "bitwise_equal": equal,
           "ms": {n_: statistics.median(t) for n_, t in samples.items()},
           "new_over_old": statistics.median(a / b for a, b in zip(samples["new"], samples["old"]))}
    print(json.dumps(row), flush=True)
    rows.append(row)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "ab_opaque.json"), "w"), indent=1)
