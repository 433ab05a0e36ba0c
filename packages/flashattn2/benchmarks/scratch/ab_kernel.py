"""A/B of the Hopper backward kernel, same inputs: HEAD's module (gb_head.py) against the working tree's at D = 64,
and at D = 128 the working tree (L, Delta read late) against gb_early.py (read before the products); checks the
outputs are bitwise equal and times both (5 alternating rounds of do_bench medians)."""
import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(__file__))
import gb_early
import gb_head

import flashattn2._gluon_backward as new
from flashattn2._triton_forward import triton_forward

SHAPES = [((1, 16, 16384, 64), True), ((1, 16, 16384, 64), False), ((4, 16, 4096, 64), True), ((4, 16, 4096, 64), False),
          ((4, 16, 4096, 128), True), ((4, 16, 4096, 128), False), ((1, 16, 16384, 128), True)]
rows = []
for shape, causal in SHAPES:
    old = gb_head if shape[-1] == 64 else gb_early
    q, k, v, g = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = shape[-1] ** -0.5
    out, lse = triton_forward(q, k, v, causal, scale)
    res, fns = {}, {}
    for name, mod in (("old", old), ("new", new)):
        hb = mod.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, scale)
        grads = torch.empty((3, *shape), device="cuda", dtype=q.dtype)
        fns[name] = lambda hb=hb, grads=grads: hb(g, q, k, v, out, lse, *grads.unbind(0))
        fns[name]()
        res[name] = grads.clone()
    equal = torch.equal(res["old"], res["new"])
    samples = {"old": [], "new": []}
    for r in range(5):
        for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
            samples[name].append(triton.testing.do_bench(fns[name], return_mode="median"))
    row = {"shape": shape, "causal": causal, "bitwise_equal": equal,
           **{n: statistics.median(t) for n, t in samples.items()},
           "new_over_old": statistics.median(a / b for a, b in zip(samples["new"], samples["old"]))}
    print(row, flush=True)
    rows.append(row)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "ab_kernel.json"), "w"), indent=1)
