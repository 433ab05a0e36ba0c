"""NOTES v104's route, prepared offline for a later session: the persistent causal Hopper backward (head dim 64)
with CHAINS dQ chains per query tile and the last LAST_PAIRS pairs dealt range by range (gb_chains.py), against
the package. Per variant: the gradients' largest difference from the package's (the chains sum dQ in another
fixed order, so not bitwise), repeatability (bitwise, two runs), (1, 0) bitwise equal to the package; time of the
whole backward (prologue, kernel, epilogue), do_bench medians in alternating rounds, ratios to the package.
Run from the repository root: PYTHONPATH=packages/flashattn2/src python .../scratch/ab_chains.py"""

import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gb_chains

import flashattn2._gluon_backward as package
from flashattn2._triton_forward import triton_forward

VARIANTS = [(1, 0), (2, 4), (4, 4), (4, 8), (2, 8)]  # (CHAINS, LAST_PAIRS)
out_path = os.path.join(os.environ.get("OUT", "."), "ab-chains.json")
rows = []
for b, h, hk, n in [
    (1, 16, 16, 16384),
    (4, 16, 16, 4096),
    (8, 16, 16, 2048),
    (2, 16, 16, 4096),
    (1, 16, 16, 8192),
    (3, 4, 2, 4500),
]:
    d, causal = 64, True
    q, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(b, hk, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    o, lse = triton_forward(q, k, v, causal, d**-0.5)
    fns, outs = {}, {}
    for name in ["package", *VARIANTS]:
        if name == "package":
            hb = package.HopperBackward(q.shape, k.shape, o.stride(), g.stride(), q.dtype, q.device, causal, d**-0.5)
        else:
            gb_chains.CHAINS, gb_chains.LAST_PAIRS = name
            hb = gb_chains.HopperBackward(q.shape, k.shape, o.stride(), g.stride(), q.dtype, q.device, causal, d**-0.5)
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
    row = {"shape": (b, h, hk, n, d), "ms": {str(k_): round(statistics.median(t), 4) for k_, t in samples.items()}}
    for name in VARIANTS:
        row[f"{name}/package"] = round(statistics.median(a / c for a, c in zip(samples[name], samples["package"])), 4)
        row[f"{name} repeatable"] = all(torch.equal(x, y) for x, y in zip(outs[(name, 0)], outs[(name, 1)]))
        row[f"{name} max diff"] = max(
            (x.float() - y.float()).abs().max().item() for x, y in zip(outs[("package", 0)], outs[(name, 0)])
        )
    row["(1, 0) bitwise"] = all(torch.equal(x, y) for x, y in zip(outs[("package", 0)], outs[((1, 0), 0)]))
    print(row, flush=True)
    rows.append(row)
    with open(out_path, "w") as f:
        json.dump(rows, f, indent=1)
