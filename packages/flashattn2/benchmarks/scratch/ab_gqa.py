"""Scratch: the Hopper backward with grouped-query heads, one program per query head (working tree) against one per
k/v head walking the group (gb_prev.py, HEAD's module): same inputs, times (5 alternating rounds), and how far
each one's dk, dv are from the other's."""
import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(__file__))
import gb_prev as old

import flashattn2._gluon_backward as new
from flashattn2._triton_forward import triton_forward

SHAPES = [((2, 32, 4096, 128), 8, True), ((4, 16, 4096, 128), 4, False), ((4, 16, 4096, 64), 4, True),
          ((1, 32, 16384, 64), 8, True), ((4, 16, 4096, 128), 16, True)]
rows = []
for shape, kv, causal in SHAPES:
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
        res[name] = [x.clone().float() for x in (dq, dk, dv)]
        fns[name]()
        res[name + "_again_equal"] = all(torch.equal(a.float(), b) for a, b in zip((dq, dk, dv), res[name]))
    diff = [((a - b).abs().max() / b.abs().max()).item() for a, b in zip(res["new"], res["old"])]
    samples = {"old": [], "new": []}
    for r in range(5):
        for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
            samples[name].append(triton.testing.do_bench(fns[name], return_mode="median"))
    row = {"shape": shape, "kv_heads": kv, "causal": causal, "rel_max_diff_dq_dk_dv": diff,
           "deterministic": [res["old_again_equal"], res["new_again_equal"]],
           **{n_: statistics.median(t) for n_, t in samples.items()},
           "new_over_old": statistics.median(a / b for a, b in zip(samples["new"], samples["old"]))}
    print(row, flush=True)
    rows.append(row)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "ab_gqa.json"), "w"), indent=1)
