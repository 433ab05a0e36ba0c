"""Scratch (NOTES v26): v22 against dQ-first order, K sliced in place, writer without reduce (diagnostic), D = 128, Δ kernel."""
import json, os, sys
import torch, triton
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
sys.path.insert(0, os.path.dirname(__file__))
import gbwd_v4 as gb
from flashattn2._triton_forward import triton_forward
from flashattn2._triton_backward import triton_backward

OUT = os.environ.get("OUT", ".")
bench = lambda f: triton.testing.do_bench(f, warmup=25, rep=150, return_mode="median")
rows = []
D64 = [dict(order=0, deterministic=True), dict(order=0, deterministic=False), dict(order=1, deterministic=True),
       dict(order=1, deterministic=False), dict(order=1, kslice=1, deterministic=True),
       dict(order=1, kslice=1, deterministic=False), dict(order=0, noreduce=1, deterministic=False),
       dict(order=1, noreduce=1, deterministic=False), dict(order=0, diag=2, deterministic=False),
       dict(order=1, stages=3, deterministic=True)]
D128 = [dict(order=0, deterministic=True), dict(order=1, deterministic=True), dict(order=1, deterministic=False),
        dict(order=1, deterministic=True, dq_bufs=1)]
for (b, h, n, d, causal) in [(1, 16, 16384, 64, True), (1, 16, 16384, 64, False), (4, 16, 4096, 64, False),
                             (8, 16, 1024, 64, True), (4, 16, 4096, 128, True), (4, 16, 4096, 128, False)]:
    torch.manual_seed(0)
    q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = d ** -0.5
    o, lse = triton_forward(q, k, v, causal, scale)
    delta = gb.delta_triton(o, g)
    assert torch.allclose(delta, (o.float() * g.float()).sum(-1), atol=1e-3, rtol=1e-3)
    row = {"shape": [b, h, n, d], "causal": causal}
    row["triton_bwd"] = bench(lambda: triton_backward(g, q, k, v, o, lse, causal, scale))
    qs, ks, vs = (x.clone().requires_grad_(True) for x in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        oc = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)
        row["cudnn_bwd"] = bench(lambda: torch.autograd.grad(oc, (qs, ks, vs), g, retain_graph=True))
    row["delta_triton"] = bench(lambda: gb.delta_triton(o, g))
    row["delta_torch"] = bench(lambda: (o.float() * g.float()).sum(-1))
    for kw in (D64 if d == 64 else D128):
        name = "_".join(f"{k_}{int(v_)}" for k_, v_ in kw.items())
        try:
            row[name] = bench(lambda: gb.gluon_backward(g, q, k, v, o, lse, causal, scale, **kw))
        except Exception as e:  # noqa: BLE001
            row[name] = repr(e)[:300]
    print(json.dumps(row), flush=True)
    rows.append(row)
    json.dump(rows, open(f"{OUT}/v26-timing.json", "w"), indent=1)
