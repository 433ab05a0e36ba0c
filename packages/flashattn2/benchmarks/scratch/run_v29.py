"""Scratch (NOTES v29): the dS buffer freed by the Q/dO slot's barrier (hv bit 128: one arrive and bar.sync fewer per step)."""
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
V = [dict(hv=3), dict(hv=131), dict(hv=3, deterministic=False), dict(hv=131, deterministic=False), dict(hv=3), dict(hv=131)]
rows = []
for (b, h, n, d, causal) in [(1, 16, 16384, 64, True), (1, 16, 16384, 64, False), (4, 16, 4096, 64, False)]:
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
    print(row, flush=True)
    for i, kw in enumerate(V):  # the first four once more at the end: the spread between repeats
        kw = dict(deterministic=True, order=2, dq_bufs=2) | kw
        name = "_".join(f"{k_}{int(v_)}" for k_, v_ in kw.items()) + ("_repeat" if i >= 4 else "")
        row[name] = bench(lambda: gb.gluon_backward(g, q, k, v, o, lse, causal, scale, **kw))
        print(name, row[name], flush=True)
    rows.append(row)
    json.dump(rows, open(f"{OUT}/v29-timing.json", "w"), indent=1)
