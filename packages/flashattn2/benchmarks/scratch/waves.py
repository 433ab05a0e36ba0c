"""Is the Hopper backward's full walk wave-quantized? Backward time of the package's kernel (prologue, kernel,
epilogue) and of SDPA cuDNN's backward at (1, H, 4096, D) full for H around 64 (2048 programs = 15.5 waves of 132
SMs; 66 heads = 16 full waves). Balanced: time grows with H; quantized: flat from 62 to 66."""
import json
import os
import statistics

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

import gb_head
from flashattn2._triton_forward import triton_forward

rows = []
for d in (128, 64):
    for h in (56, 58, 60, 62, 64, 66, 68, 70, 72):
        q, k, v = (torch.randn(1, h, 4096, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        g = torch.randn_like(q)
        out, lse = triton_forward(q, k, v, False, d**-0.5)
        hb = gb_head.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, False, d**-0.5)
        grads = [torch.empty_like(x) for x in (q, k, v)]
        ours = lambda: hb(g, q, k, v, out, lse, *grads)  # noqa: E731
        qc, kc, vc = (x.detach().requires_grad_() for x in (q, k, v))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            oc = F.scaled_dot_product_attention(qc, kc, vc)
        cudnn = lambda: torch.autograd.grad(oc, (qc, kc, vc), g, retain_graph=True)  # noqa: E731
        t = {"ours": [], "cudnn": []}
        for r in range(3):
            for name, fn in (("ours", ours), ("cudnn", cudnn)) if r % 2 == 0 else (("cudnn", cudnn), ("ours", ours)):
                t[name].append(triton.testing.do_bench(fn, return_mode="median"))
        row = {"d": d, "heads": h, "programs": h * 32, "waves": h * 32 / 132,
               "ours_ms": statistics.median(t["ours"]), "cudnn_ms": statistics.median(t["cudnn"])}
        row["ours_per_head_us"] = 1000 * row["ours_ms"] / h
        row["cudnn_per_head_us"] = 1000 * row["cudnn_ms"] / h
        print(row, flush=True)
        rows.append(row)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "waves.json"), "w"), indent=1)
