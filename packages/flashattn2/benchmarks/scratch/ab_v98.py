"""v98: the backward kernel's schedules in one loop (causal head dim 64 persistent, items dealt on the host;
the ragged-key mask compiled only where N % 128 != 0) against the previous package (gb_old.py), bitwise and
time; gb_v1: non-causal with the ragged check at run time; gb_p128: causal head dim 128 persistent too.
Whole backward (prologue, kernel, epilogue), do_bench medians in alternating rounds."""
import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gb_old
import gb_p128
import gb_v1

import flashattn2._gluon_backward as gb_new
from flashattn2._triton_forward import triton_forward

out_path = os.path.join(os.environ.get("OUT", "."), "2026-11-27-h100-s24-v98-backward-schedules.json")
rows = []
for b, h, hk, n, d, causal in [
    (1, 16, 16, 16384, 64, True), (4, 16, 16, 4096, 128, True), (2, 16, 16, 4096, 128, True),
    (4, 16, 16, 4096, 64, True), (8, 16, 16, 2048, 64, True), (2, 32, 8, 4096, 128, True),
    (3, 4, 2, 4500, 64, True), (2, 8, 8, 4500, 128, True), (1, 16, 16, 8192, 128, True),
    (4, 16, 16, 4096, 128, False), (4, 16, 16, 4096, 64, False), (8, 16, 16, 1024, 64, False),
    (8, 16, 16, 1024, 128, False), (2, 8, 8, 4500, 64, False),
]:
    mods = {"old": gb_old, "new": gb_new}
    if causal and d == 128:
        mods["p128"] = gb_p128
    if not causal:
        mods["v1"] = gb_v1
    q, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(b, hk, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    o, lse = triton_forward(q, k, v, causal, d**-0.5)
    fns, outs = {}, {}
    for name, mod in mods.items():
        hb = mod.HopperBackward(q.shape, k.shape, o.stride(), g.stride(), q.dtype, q.device, causal, d**-0.5)
        res = (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v))
        fns[name] = lambda hb=hb, res=res: hb(g, q, k, v, o, lse, *res)
        for rep in range(2):
            fns[name]()
            torch.cuda.synchronize()
            outs[(name, rep)] = [x.clone() for x in res]
    samples = {name: [] for name in fns}
    for r in range(5):
        for name in list(fns) if r % 2 == 0 else list(fns)[::-1]:
            samples[name].append(triton.testing.do_bench(fns[name], warmup=25, rep=150, return_mode="median"))
    row = {"shape": (b, h, hk, n, d), "causal": causal, "ms": {k_: round(statistics.median(t), 4) for k_, t in samples.items()}}
    for name in fns:
        if name != "old":
            row[f"{name}/old"] = round(statistics.median(a / c for a, c in zip(samples[name], samples["old"])), 4)
            row[f"{name}_bitwise"] = all(torch.equal(x, y) for x, y in zip(outs[("old", 0)], outs[(name, 0)]))
            row[f"{name}_repeatable"] = all(torch.equal(x, y) for x, y in zip(outs[(name, 0)], outs[(name, 1)]))
    print(row, flush=True)
    rows.append(row)
    json.dump(rows, open(out_path, "w"), indent=1)
