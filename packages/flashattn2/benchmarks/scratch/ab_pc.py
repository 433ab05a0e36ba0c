"""The causal Hopper backward persistent (gb_pc.py: one program per multiprocessor, items dealt on the host in
item order by least work so far; the ragged-key mask compiled only where N is not a multiple of 128) against the
package's (one program per item, tickets): whole backward (prologue, kernel, epilogue), do_bench medians in
alternating rounds, and bitwise equality of dq, dk, dv. Full walks are a control (the same code but for the
kernel's extra argument). Run under `timeout`: a wrong schedule would hang."""
import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gb_pc

import flashattn2._gluon_backward as gb_pkg
from flashattn2._triton_forward import triton_forward

out_path = os.path.join(os.environ.get("OUT", "."), "2026-11-27-h100-sNN-persistent-causal-backward.json")
rows = []
for (b, h, hk, n, d, causal) in [
    (1, 16, 16, 16384, 64, True), (4, 16, 16, 4096, 128, True), (2, 16, 16, 4096, 128, True),
    (4, 16, 16, 4096, 64, True), (8, 16, 16, 2048, 64, True), (2, 32, 8, 4096, 128, True),
    (3, 4, 2, 4500, 64, True), (1, 16, 16, 8192, 128, True), (4, 16, 16, 4096, 128, False),
]:
    q, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(b, hk, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    o, lse = triton_forward(q, k, v, causal, d**-0.5)
    fns, outs = {}, {}
    for name, mod in (("package", gb_pkg), ("persistent", gb_pc)):
        hb = mod.HopperBackward(q.shape, k.shape, o.stride(), g.stride(), q.dtype, q.device, causal, d**-0.5)
        res = (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v))
        fns[name] = lambda hb=hb, res=res: hb(g, q, k, v, o, lse, *res)
        fns[name]()
        torch.cuda.synchronize()
        outs[name] = [x.clone() for x in res]
        fns[name]()
        torch.cuda.synchronize()
        outs[name + "_again"] = [x.clone() for x in res]
    samples = {name: [] for name in fns}
    for r in range(5):
        for name in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            samples[name].append(triton.testing.do_bench(fns[name], warmup=25, rep=150, return_mode="median"))
    row = {"shape": (b, h, hk, n, d), "causal": causal, "ms": {k_: round(statistics.median(t), 4) for k_, t in samples.items()},
           "persistent/package": round(statistics.median(a / c for a, c in zip(samples["persistent"], samples["package"])), 4),
           "bitwise_equal": all(torch.equal(x, y) for x, y in zip(outs["package"], outs["persistent"])),
           "repeatable": all(torch.equal(x, y) for x, y in zip(outs["persistent"], outs["persistent_again"]))}
    print(row, flush=True)
    rows.append(row)
    json.dump(rows, open(out_path, "w"), indent=1)
