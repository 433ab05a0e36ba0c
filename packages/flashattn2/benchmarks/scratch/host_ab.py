"""The Hopper kernels launched through from_tensor descriptors (gf_old, gb_old: the package at 8fe46d4) against
the package's TmaDescriptor (checked once per plan): per-call wall time (do_bench medians, 7 alternating rounds), which
is host time where the GPU's is shorter, and bitwise equality of the outputs."""
import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gb_old
import gf_old

import flashattn2._gluon_backward as gb_new
import flashattn2._gluon_forward as gf_new
from flashattn2._triton_forward import triton_forward

rows = []
for kind, (b, h, n, d), causal in [
    ("forward", (1, 1, 256, 64), True), ("forward", (1, 1, 256, 128), False), ("forward", (8, 16, 1024, 128), False),
    ("forward", (8, 16, 1024, 128), True), ("forward", (4, 16, 4096, 128), False),
    ("backward", (1, 1, 256, 64), True), ("backward", (1, 1, 256, 128), False), ("backward", (4, 16, 2048, 64), True),
    ("backward", (2, 16, 2048, 128), False), ("backward", (8, 16, 2048, 128), True), ("backward", (4, 16, 4096, 128), False),
    ("backward", (2, 32, 2048, 128), True), ("forward", (1, 1, 256, 256), True),
]:
    q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = d**-0.5
    fns, outs = {}, {}
    for name, mod in (("old", gf_old if kind == "forward" else gb_old), ("new", gf_new if kind == "forward" else gb_new)):
        if kind == "forward":
            hf = mod.HopperForward(q.shape, k.shape, q.dtype, q.device, causal, scale)
            res = (torch.empty_like(q), torch.empty(b, h, n, device="cuda"))
            fns[name] = lambda hf=hf, res=res: hf(q, k, v, *res)
        else:
            out, lse = triton_forward(q, k, v, causal, scale)
            hb = mod.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, scale)
            res = tuple(torch.empty_like(x) for x in (q, k, v))
            fns[name] = lambda hb=hb, res=res, out=out, lse=lse: hb(g, q, k, v, out, lse, *res)
        fns[name]()
        fns[name]()
        torch.cuda.synchronize()
        outs[name] = [x.clone() for x in res]
    samples = {name: [] for name in fns}
    for r in range(7):
        for name in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            samples[name].append(triton.testing.do_bench(fns[name], warmup=25, rep=100, return_mode="median"))
    row = {"kernel": kind, "shape": (b, h, n, d), "causal": causal,
           "us": {name: round(1000 * statistics.median(t), 1) for name, t in samples.items()},
           "new/old": statistics.median(a / c for a, c in zip(samples["new"], samples["old"])),
           "bitwise_equal": all(torch.equal(x, y) for x, y in zip(outs["old"], outs["new"]))}
    print(row, flush=True)
    rows.append(row)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "2026-11-27-h100-s23-v95-tma-descriptors.json"), "w"), indent=1)
