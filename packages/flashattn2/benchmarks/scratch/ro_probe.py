"""Scratch: torch.compile(mode="reduce-overhead") with FlashSelfAttention: which pattern fails, with what traceback;
SDPA in the same module as the control."""
import json
import os
import traceback

import torch
import torch.nn.functional as F

import flashattn2.module as fm
from flashattn2 import FlashSelfAttention

OUT = os.environ.get("OUT", ".")
res = {}


def run(name, attention, steps=3, mark=True, clone=True, fullgraph=True):
    torch._dynamo.reset()
    torch.manual_seed(0)
    if attention == "sdpa":
        fm.flash_attention = lambda q, k, v, causal, backend: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    else:
        import flashattn2.api as api
        fm.flash_attention = api.flash_attention
    model = FlashSelfAttention(embed_dim=256, num_heads=4, num_kv_heads=2, causal=True).cuda().bfloat16()
    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=fullgraph)
    xs = [torch.randn(2, 128, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(steps)]
    try:
        got = []
        for x in xs:
            if mark:
                torch.compiler.cudagraph_mark_step_begin()
            out = compiled(x)
            out.float().square().sum().backward()
            got.append((out.detach().clone() if clone else out, x.grad.clone(), model.qkv.weight.grad.clone()))
            model.zero_grad(set_to_none=True)
        worst = 0.0
        for (o, gx, gw), x in zip(got, xs):
            x.grad = None
            e = model(x)
            e.float().square().sum().backward()
            worst = max(worst, (o.float() - e.float()).abs().max().item(), (gx.float() - x.grad.float()).abs().max().item(),
                        (gw.float() - model.qkv.weight.grad.float()).abs().max().item())
            model.zero_grad(set_to_none=True)
        res[name] = {"ok": True, "max_abs_diff_vs_eager": worst}
    except Exception as exc:
        res[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:3000], "tb": traceback.format_exc()[-6000:]}
    print(name, json.dumps(res[name])[:1500], flush=True)


run("flash, mark, clone", "flash")
run("sdpa, mark, clone", "sdpa")
run("flash, no mark, clone", "flash", mark=False)
json.dump(res, open(f"{OUT}/ro-probe.json", "w"), indent=1)
