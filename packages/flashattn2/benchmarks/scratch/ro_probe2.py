"""Scratch: torch.compile(mode="reduce-overhead") captures FlashSelfAttention's kernels? cudagraph skip counters,
and step time (forward+backward) against the same module on SDPA, eager and compiled, CUDA events."""
import json
import os

import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters

import flashattn2.api as api
import flashattn2.module as fm
from flashattn2 import FlashSelfAttention

OUT = os.environ.get("OUT", ".")
res = []


def step_time(fn, x, steps=50, mark=False):
    for _ in range(3):
        if mark:
            torch.compiler.cudagraph_mark_step_begin()
        fn(x).float().square().sum().backward()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        if mark:
            torch.compiler.cudagraph_mark_step_begin()
        fn(x).float().square().sum().backward()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / steps


for (b, n, e, heads) in [(4, 128, 256, 4), (8, 1024, 1024, 16)]:
    row = {"x": [b, n, e], "heads": heads}
    for attention in ("flash", "sdpa"):
        fm.flash_attention = api.flash_attention if attention == "flash" else (
            lambda q, k, v, causal, backend: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
        torch._dynamo.reset()
        counters.clear()
        torch.manual_seed(0)
        model = FlashSelfAttention(embed_dim=e, num_heads=heads, causal=True).cuda().bfloat16()
        x = torch.randn(b, n, e, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        row[f"{attention} eager ms"] = step_time(model, x)
        compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
        row[f"{attention} reduce-overhead ms"] = step_time(compiled, x, mark=True)
        row[f"{attention} cudagraph_skips"] = dict(counters["inductor"].get("cudagraph_skips", {})) if isinstance(counters["inductor"].get("cudagraph_skips"), dict) else counters["inductor"].get("cudagraph_skips", 0)
        row[f"{attention} inductor counters"] = {k: v for k, v in counters["inductor"].items() if "cudagraph" in k}
    print(json.dumps(row), flush=True)
    res.append(row)
json.dump(res, open(f"{OUT}/ro-probe2.json", "w"), indent=1)
