"""Scratch: the Gluon forward (gfwd.py) against the float64 reference and flashattn2's Triton forward and cuDNN."""
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(__file__))
import gfwd
import gfwd3

from flashattn2._triton_forward import triton_forward
from flashattn2.testing import attention_error, naive_attention_float64

CONFIGS = [(1, 64, 128), (2, 128, None)]  # consumers, BLOCK_N, maxnreg
out = {"accuracy": [], "timing": []}
for shape, kv_heads, causal, scale in [((1, 2, 1000, 128), 2, True, None), ((2, 4, 777, 128), 2, False, None),
                                       ((1, 2, 1000, 64), 1, True, None), ((1, 2, 1000, 128), 2, True, -0.3)]:
    q = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(shape[0], kv_heads, *shape[2:], device="cuda", dtype=torch.bfloat16) for _ in range(2))
    s = shape[-1] ** -0.5 if scale is None else scale
    ref_o, ref_l = naive_attention_float64(q, k, v, causal=causal, softmax_scale=s)
    to, tl_ = triton_forward(q, k, v, causal, s)
    row = {"shape": shape, "kv": kv_heads, "causal": causal, "scale": s,
           "triton": [attention_error(to, ref_o), (tl_ - ref_l).abs().max().item()]}
    for c, bn, r in CONFIGS:
        o, l = gfwd.hopper_forward(q, k, v, causal, s, c, bn, r)
        row[f"c{c}_n{bn}_r{r}"] = [attention_error(o, ref_o), (l - ref_l).abs().max().item()]
    print(row, flush=True)
    out["accuracy"].append(row)

bench = lambda f: triton.testing.do_bench(f, warmup=25, rep=200, return_mode="median")
for (b, h, hkv, n, d, causal) in [(4, 16, 16, 4096, 128, True), (4, 16, 16, 4096, 128, False), (2, 32, 8, 4096, 128, True),
                                  (1, 16, 16, 16384, 64, True), (1, 16, 16, 16384, 64, False)]:
    q = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hkv, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    s = d ** -0.5
    fns = {"triton": lambda: triton_forward(q, k, v, causal, s)}
    for c, bn, r in CONFIGS:
        fns[f"c{c}_n{bn}_r{r}"] = lambda c=c, bn=bn, r=r: gfwd.hopper_forward(q, k, v, causal, s, c, bn, r)
    fns["c2_n128_stages3"] = lambda: gfwd3.hopper_forward(q, k, v, causal, s, 2, 128, None)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hkv != h)
    fns["cudnn"] = cudnn
    samples = {name: [] for name in fns}
    for rnd in range(3):
        for name in (list(fns) if rnd % 2 == 0 else list(fns)[::-1]):
            samples[name].append(bench(fns[name]))
    row = {"shape": (b, h, hkv, n, d), "causal": causal, **{k_: statistics.median(t) for k_, t in samples.items()}}
    print({k_: (round(v_, 3) if isinstance(v_, float) else v_) for k_, v_ in row.items()}, flush=True)
    out["timing"].append(row)
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "fwd_bench.json"), "w"), indent=1)
