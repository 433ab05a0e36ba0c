"""Scratch (NOTES v34): interleaved deterministic chains (gbwd_v5 chains=G): reference check, determinism, timing."""
import json
import os
import sys

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(__file__))
import gbwd_v5 as gb

from flashattn2._triton_backward import triton_backward
from flashattn2._triton_forward import triton_forward

OUT = os.environ.get("OUT", ".")
bench = lambda f: triton.testing.do_bench(f, warmup=25, rep=150, return_mode="median")
out = {"check": [], "determinism": [], "timing": []}


def save():
    json.dump(out, open(f"{OUT}/v34.json", "w"), indent=1)


def ref64(q, k, v, g, causal, scale):
    q64, k64, v64 = (x.double().requires_grad_(True) for x in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    s = (q64 @ k64.repeat_interleave(rep, 1).transpose(-1, -2)) * scale
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, device=q.device, dtype=torch.bool).triu(1), float("-inf"))
    o = torch.softmax(s, -1) @ v64.repeat_interleave(rep, 1)
    return torch.autograd.grad(o, (q64, k64, v64), g.double())


rel = lambda a, r: ((a.double() - r).abs().max() / r.abs().max()).item()
for (b, h, hkv, n, d, causal) in [(1, 2, 2, 1024, 64, True), (1, 2, 2, 1024, 64, False), (2, 4, 2, 1000, 64, True),
                                  (2, 4, 2, 1024, 64, False)]:
    torch.manual_seed(n + d)
    q = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hkv, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    g = torch.randn_like(q)
    scale = d ** -0.5
    o, lse = triton_forward(q, k, v, causal, scale)
    ref = ref64(q, k, v, g, causal, scale)
    row = {"shape": [b, h, hkv, n, d], "causal": causal,
           "triton_err": [rel(a, r) for a, r in zip(triton_backward(g, q, k, v, o, lse, causal, scale), ref)]}
    for ch in (1, 2, 4):
        got = gb.gluon_backward(g, q, k, v, o, lse, causal, scale, deterministic=True, order=2, hv=259, chains=ch)
        row[f"chains{ch}_err"] = [rel(a, r) for a, r in zip(got, ref)]
    print(json.dumps(row), flush=True)
    out["check"].append(row)
save()
for (b, h, n, d, causal) in [(1, 8, 4096, 64, True), (1, 8, 4096, 64, False)]:
    torch.manual_seed(1)
    q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    o, lse = triton_forward(q, k, v, causal, d ** -0.5)
    row = {"shape": [b, h, n, d], "causal": causal}
    for ch, hv in ((2, 259), (4, 259), (2, 323)):
        first = gb.gluon_backward(g, q, k, v, o, lse, causal, d ** -0.5, order=2, hv=hv, chains=ch)
        row[f"chains{ch}_hv{hv}_bitwise_same_x5"] = all(
            all(torch.equal(x, y) for x, y in zip(first, gb.gluon_backward(g, q, k, v, o, lse, causal, d ** -0.5, order=2, hv=hv, chains=ch)))
            for _ in range(5))
    print(json.dumps(row), flush=True)
    out["determinism"].append(row)
save()
V = [("det G1", dict(hv=259, chains=1)), ("det G2", dict(hv=259, chains=2)), ("det G4", dict(hv=259, chains=4)),
     ("det G2 two writers", dict(hv=323, chains=2)), ("atomic", dict(hv=259, deterministic=False))]
for (b, h, n, d, causal) in [(1, 16, 16384, 64, True), (1, 16, 16384, 64, False), (4, 16, 4096, 64, True), (4, 16, 4096, 64, False)]:
    torch.manual_seed(0)
    q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = d ** -0.5
    o, lse = triton_forward(q, k, v, causal, scale)
    delta = gb.delta_triton(o, g)
    row = {"shape": [b, h, n, d], "causal": causal}
    for rep in range(2):
        row[f"triton pair ({rep})"] = bench(lambda: triton_backward(g, q, k, v, o, lse, causal, scale))
        qs, ks, vs = (x.clone().requires_grad_(True) for x in (q, k, v))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            oc = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)
            row[f"cudnn ({rep})"] = bench(lambda: torch.autograd.grad(oc, (qs, ks, vs), g, retain_graph=True))
        for name, kw in V:
            kw = {"deterministic": True, **kw}
            row[f"{name} ({rep})"] = bench(lambda: gb.gluon_backward(g, q, k, v, o, lse, causal, scale, delta=delta, order=2, **kw))
    print(json.dumps({k_: (round(v_, 3) if isinstance(v_, float) else v_) for k_, v_ in row.items()}), flush=True)
    out["timing"].append(row)
    save()
