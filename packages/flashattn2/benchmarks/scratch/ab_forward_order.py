"""Scratch (run 2026-11-24, session 11; gf_prev.py is fa4654e's module, "new" the package at 502d845): the causal Hopper forward's program order. HEAD's module (gf_prev.py: heaviest query tiles first within
each (batch, head), one pair after another) against the working tree's (heaviest first across groups of G pairs),
5 alternating rounds; outputs compared bitwise."""
import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(__file__))
import gf_prev as old

import flashattn2._gluon_forward as new

SHAPES = [
    ((4, 16, 4096, 128), 16, True),
    ((2, 32, 4096, 128), 8, True),
    ((8, 16, 1024, 128), 16, True),
    ((8, 16, 2048, 128), 16, True),
    ((1, 16, 8192, 128), 16, True),
    ((1, 16, 16384, 64), 16, True),
    ((4, 16, 4096, 128), 16, False),
]
GROUPS = (1, 4, 8, 16, 32)
rows = []
for shape, kv, causal in SHAPES:
    torch.manual_seed(0)
    q = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(shape[0], kv, *shape[2:], device="cuda", dtype=torch.bfloat16) for _ in range(2))
    scale = shape[-1] ** -0.5
    variants = {"old": old.HopperForward(q.shape, k.shape, q.dtype, q.device, causal, scale)}
    for G in GROUPS if causal else (8,):
        hf = new.HopperForward(q.shape, k.shape, q.dtype, q.device, causal, scale)
        hf.scalars = (*hf.scalars[:3], G, *hf.scalars[4:])
        variants[f"G{G}"] = hf
    fns, res = {}, {}
    for name, hf in variants.items():
        out = torch.empty_like(q)
        lse = torch.empty(shape[:3], device="cuda", dtype=torch.float32)
        fns[name] = lambda hf=hf, out=out, lse=lse: hf(q, k, v, out, lse)
        fns[name]()
        res[name] = (out.clone(), lse.clone())
    equal = {n_: torch.equal(r[0], res["old"][0]) and torch.equal(r[1], res["old"][1]) for n_, r in res.items()}
    samples = {n_: [] for n_ in fns}
    names = list(fns)
    for r in range(5):
        for name in names if r % 2 == 0 else names[::-1]:
            samples[name].append(triton.testing.do_bench(fns[name], return_mode="median"))
    row = {"shape": shape, "kv_heads": kv, "causal": causal, "bitwise_equal_to_old": equal,
           "ms": {n_: statistics.median(t) for n_, t in samples.items()},
           "over_old": {n_: statistics.median(a / b for a, b in zip(samples[n_], samples["old"])) for n_ in names}}
    print(json.dumps(row), flush=True)
    rows.append(row)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "ab_forward_order.json"), "w"), indent=1)
