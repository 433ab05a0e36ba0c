"""Scratch: correctness (float64 reference), determinism and timing of a Gluon backward draft (GBWD=gbwd_v1|gbwd_v2|gbwd_v3)."""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(__file__))
import importlib

gbwd = importlib.import_module(os.environ.get('GBWD', 'gbwd_v2'))
ONLY_D = int(os.environ.get('ONLY_D', '0'))
from flashattn2._triton_backward import triton_backward
from flashattn2._triton_forward import triton_forward

OUT = os.environ.get("OUT", ".")


def ref64(q, k, v, g, causal, scale):
    q64, k64, v64 = (x.double().requires_grad_(True) for x in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    kk, vv = k64.repeat_interleave(rep, 1), v64.repeat_interleave(rep, 1)
    s = (q64 @ kk.transpose(-1, -2)) * scale
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, device=q.device, dtype=torch.bool).triu(1), float("-inf"))
    o = torch.softmax(s, -1) @ vv
    return torch.autograd.grad(o, (q64, k64, v64), g.double())


def rel(a, r):
    return ((a.double() - r).abs().max() / r.abs().max()).item()


def check():
    rows = []
    for (b, h, hkv, n, d, causal) in [(1, 2, 2, 384, 64, True), (1, 2, 2, 384, 64, False), (1, 2, 2, 384, 128, True),
                                      (1, 2, 2, 384, 128, False), (2, 4, 2, 1000, 64, True), (2, 4, 2, 1000, 128, False),
                                      (1, 2, 1, 100, 64, False), (1, 2, 2, 1000, 64, False)]:
        if ONLY_D and d != ONLY_D:
            continue
        torch.manual_seed(n + d)
        q = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, hkv, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        g = torch.randn_like(q)
        scale = d ** -0.5
        o, lse = triton_forward(q, k, v, causal, scale)
        ref = ref64(q, k, v, g, causal, scale)
        tri = triton_backward(g, q, k, v, o, lse, causal, scale)
        row = {"shape": [b, h, hkv, n, d], "causal": causal, "triton_err": [rel(a, r) for a, r in zip(tri, ref)]}
        for det in (True, False):
            t0 = time.time()
            got = gbwd.gluon_backward(g, q, k, v, o, lse, causal, scale, deterministic=det)
            torch.cuda.synchronize()
            row[f"gluon_det{int(det)}_err"] = [rel(a, r) for a, r in zip(got, ref)]
            row[f"gluon_det{int(det)}_s"] = time.time() - t0
        print(json.dumps(row), flush=True)
        rows.append(row)
    json.dump(rows, open(f"{OUT}/check-{gbwd.__name__}.json", "w"), indent=1)


def determinism():
    rows = []
    for (b, h, n, d, causal) in [(1, 8, 4096, 64, True), (1, 8, 4096, 64, False), (1, 8, 2048, 128, False)]:
        if ONLY_D and d != ONLY_D:
            continue
        torch.manual_seed(1)
        q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        o, lse = triton_forward(q, k, v, causal, d ** -0.5)
        row = {"shape": [b, h, n, d], "causal": causal}
        for det in (True, False):
            first = gbwd.gluon_backward(g, q, k, v, o, lse, causal, d ** -0.5, deterministic=det)
            same = True
            for _ in range(5):
                again = gbwd.gluon_backward(g, q, k, v, o, lse, causal, d ** -0.5, deterministic=det)
                same = same and all(torch.equal(x, y) for x, y in zip(first, again))
            row[f"det{int(det)}_bitwise_same"] = same
        print(json.dumps(row), flush=True)
        rows.append(row)
    json.dump(rows, open(f"{OUT}/determinism-{gbwd.__name__}.json", "w"), indent=1)


def timing():
    bench = lambda f: triton.testing.do_bench(f, warmup=25, rep=150, return_mode="median")
    rows = []
    for (b, h, n, d, causal) in [(1, 16, 16384, 64, True), (4, 16, 4096, 128, True), (4, 16, 4096, 128, False),
                                 (4, 16, 4096, 64, False), (8, 16, 1024, 64, True), (1, 16, 16384, 64, False)]:
        if ONLY_D and d != ONLY_D:
            continue
        torch.manual_seed(0)
        q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        scale = d ** -0.5
        o, lse = triton_forward(q, k, v, causal, scale)
        row = {"shape": [b, h, n, d], "causal": causal}
        row["triton_bwd"] = bench(lambda: triton_backward(g, q, k, v, o, lse, causal, scale))
        qs, ks, vs = (x.clone().requires_grad_(True) for x in (q, k, v))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            oc = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)
            row["cudnn_bwd"] = bench(lambda: torch.autograd.grad(oc, (qs, ks, vs), g, retain_graph=True))
            row["cudnn_fwd"] = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
        row["triton_fwd"] = bench(lambda: triton_forward(q, k, v, causal, scale))
        delta = (o.float() * g.float()).sum(-1)
        for det in (True, False):
            row[f"gluon_det{int(det)}"] = bench(lambda: gbwd.gluon_backward(g, q, k, v, o, lse, causal, scale, deterministic=det))
            row[f"gluon_det{int(det)}_given_delta"] = bench(lambda: gbwd.gluon_backward(g, q, k, v, o, lse, causal, scale, deterministic=det, delta=delta))
        row["delta_torch"] = bench(lambda: (o.float() * g.float()).sum(-1))
        print(json.dumps(row), flush=True)
        rows.append(row)
    json.dump(rows, open(f"{OUT}/timing-{gbwd.__name__}.json", "w"), indent=1)


if __name__ == "__main__":
    {"check": check, "determinism": determinism, "timing": timing}[sys.argv[1]]()
