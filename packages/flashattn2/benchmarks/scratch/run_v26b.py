"""Scratch (NOTES v26): where the dQ hand-over's time goes (atomic order unless stated); hv bits: 1 no consumer fence,
2 writer fences, 4 no dQ store, 16 no hand-over signal (writer idle)."""
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
V = [dict(order=0, hv=0), dict(order=0, hv=3), dict(order=2, hv=3), dict(order=1, hv=3), dict(order=0, hv=0, diag=2),
     dict(order=0, hv=3, noreduce=1), dict(order=0, hv=3, deterministic=True), dict(order=2, hv=3, deterministic=True)]
rows = []
for (b, h, n, d, causal) in [(1, 16, 16384, 64, True), (4, 16, 4096, 64, False), (1, 16, 16384, 64, False)]:
    torch.manual_seed(0)
    q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = d ** -0.5
    o, lse = triton_forward(q, k, v, causal, scale)
    delta = gb.delta_triton(o, g)
    row = {"shape": [b, h, n, d], "causal": causal}
    row["triton_bwd"] = bench(lambda: triton_backward(g, q, k, v, o, lse, causal, scale))
    qs, ks, vs = (x.clone().requires_grad_(True) for x in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        oc = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)
        row["cudnn_bwd"] = bench(lambda: torch.autograd.grad(oc, (qs, ks, vs), g, retain_graph=True))
    for kw in V:
        kw = dict(deterministic=False) | kw
        name = "_".join(f"{k_}{int(v_)}" for k_, v_ in kw.items())
        row[name] = bench(lambda: gb.gluon_backward(g, q, k, v, o, lse, causal, scale, delta=delta, **kw))
        print(name, row[name], flush=True)
    print(json.dumps(row), flush=True)
    rows.append(row)
    json.dump(rows, open(f"{OUT}/v26-handover.json", "w"), indent=1)
