"""v98 follow-up: where the causal Hopper backward (head dim 64 persistent now) beats the Triton kernels at
512-1024 keys, and whether persistent programs at head dim 128 (gb_p128) win at 1024-2048 keys. Whole
backward; Triton through triton_backward with the Hopper backward switched off; do_bench medians in
alternating rounds."""
import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gb_p128

import flashattn2._gluon_backward as gb_new
import flashattn2._triton_backward as backward
from flashattn2._triton_forward import triton_forward

out_path = os.path.join(os.environ.get("OUT", "."), "2026-11-27-h100-s24-v98-causal-thresholds.json")
rows = []
for b, h, n, d in [
    (8, 16, 1024, 64), (16, 16, 1024, 64), (32, 16, 1024, 64), (16, 16, 512, 64), (64, 16, 512, 64),
    (128, 16, 512, 64), (8, 16, 1024, 128), (16, 16, 1024, 128), (32, 16, 1024, 128), (4, 16, 2048, 128),
    (8, 16, 2048, 128),
]:
    q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    o, lse = triton_forward(q, k, v, True, d**-0.5)
    fns = {}
    for name, mod in (("hopper", gb_new), ("p128", gb_p128)) if d == 128 else (("hopper", gb_new),):
        hb = mod.HopperBackward(q.shape, k.shape, o.stride(), g.stride(), q.dtype, q.device, True, d**-0.5)
        res = (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v))
        fns[name] = lambda hb=hb, res=res: hb(g, q, k, v, o, lse, *res)

    def tri():
        os.environ["FLASHATTN2_HOPPER_BACKWARD"] = "0"
        return backward.triton_backward(g, q, k, v, o, lse, True, d**-0.5)

    fns["triton"] = tri
    backward.backward_plan.cache_clear()
    samples = {name: [] for name in fns}
    for r in range(5):
        for name in list(fns) if r % 2 == 0 else list(fns)[::-1]:
            samples[name].append(triton.testing.do_bench(fns[name], warmup=25, rep=150, return_mode="median"))
    row = {"shape": (b, h, n, d), "scores_log2": (b * h * n * n).bit_length() - 1,
           "ms": {k_: round(statistics.median(t), 4) for k_, t in samples.items()}}
    for name in fns:
        if name != "triton":
            row[f"{name}/triton"] = round(statistics.median(a / c for a, c in zip(samples[name], samples["triton"])), 4)
    print(row, flush=True)
    rows.append(row)
    json.dump(rows, open(out_path, "w"), indent=1)
