"""Scratch: variants of the package's Hopper forward (modules in this folder) against it, same inputs, alternating."""
import importlib
import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(__file__))
import flashattn2._gluon_forward as package
from flashattn2.testing import attention_error, naive_attention_float64

VARIANTS = {"package": package, **{m: importlib.import_module(m) for m in ("gf_fa3", "gf_fa3_r", "gf_fa3_64")}}
rows = []
# accuracy at a ragged causal GQA shape
q = torch.randn(1, 4, 1000, 128, device="cuda", dtype=torch.bfloat16)
k, v = (torch.randn(1, 2, 1000, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
ref, _ = naive_attention_float64(q, k, v, causal=True)
for name, mod in VARIANTS.items():
    o = torch.empty_like(q); lse = torch.empty(q.shape[:3], device="cuda")
    mod.HopperForward(q.shape, k.shape, q.dtype, q.device, True, 128 ** -0.5)(q, k, v, o, lse)
    print(name, "error", attention_error(o, ref), flush=True)
for (b, h, hkv, n, d, causal) in [(4, 16, 16, 4096, 128, True), (4, 16, 16, 4096, 128, False), (2, 32, 8, 4096, 128, True),
                                  (1, 16, 16, 16384, 64, True), (1, 16, 16, 16384, 64, False), (2, 16, 16, 4096, 64, True)]:
    q = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hkv, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    o = torch.empty_like(q); lse = torch.empty(q.shape[:3], device="cuda")
    fns = {}
    for name, mod in VARIANTS.items():
        if name in ("gf_fa3", "gf_fa3_r") and d == 128:
            continue
        f = mod.HopperForward(q.shape, k.shape, q.dtype, q.device, causal, d ** -0.5)
        fns[name] = lambda f=f: f(q, k, v, o, lse)
    samples = {n_: [] for n_ in fns}
    for r in range(5):
        for name in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            samples[name].append(triton.testing.do_bench(fns[name], warmup=25, rep=100, return_mode="median"))
    row = {"shape": (b, h, hkv, n, d), "causal": causal, **{k_: statistics.median(t) for k_, t in samples.items()},
           **{k_ + "/package": statistics.median(a / p for a, p in zip(t, samples["package"])) for k_, t in samples.items() if k_ != "package"}}
    print({k_: (round(v_, 3) if isinstance(v_, float) else v_) for k_, v_ in row.items()}, flush=True)
    rows.append(row)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "fwd_variants.json"), "w"), indent=1)
