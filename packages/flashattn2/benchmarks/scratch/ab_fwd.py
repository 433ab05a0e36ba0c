"""A/B of scratch Hopper forward modules (argv[1:]) against gf_head (the package's): bitwise equality and time
(5 alternating rounds of do_bench medians), with cuDNN's forward in the same rounds."""
import importlib
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(__file__))
mods = {name: importlib.import_module(name) for name in ["gf_head", *sys.argv[1:]]}
rows = []
SHAPES = json.loads(os.environ["AB_SHAPES"]) if "AB_SHAPES" in os.environ else [(2, 5, 5, 1000, 128, True), (1, 4, 2, 777, 64, False), (4, 16, 16, 4096, 128, False), (4, 16, 16, 4096, 128, True),
          (2, 32, 8, 4096, 128, True), (8, 16, 16, 1024, 128, True), (1, 16, 16, 16384, 64, True), (1, 16, 16, 16384, 128, False),
          (2, 16, 16, 4096, 64, True)]
for b, h, hk, n, d, causal in SHAPES:
    q = (torch.randn(b, h, n, d, device="cuda") * float(os.environ.get("AB_QSCALE", "1"))).to(torch.bfloat16)
    k, v = (torch.randn(b, hk, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    fns, res = {}, {}
    for name, mod in mods.items():
        hf = mod.HopperForward(q.shape, k.shape, q.dtype, q.device, causal, d**-0.5)
        out, lse = torch.empty_like(q), torch.empty(b, h, n, device="cuda")
        fns[name] = lambda hf=hf, out=out, lse=lse: hf(q, k, v, out, lse)
        fns[name]()
        res[name] = (out.clone(), lse.clone())

    qh, kh, vh = (x[0, 0].double() for x in (q, k, v))
    sc = (qh @ kh.T) * d**-0.5
    if causal:
        sc = sc.masked_fill(torch.ones(n, n, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    ref = torch.softmax(sc, -1) @ vh
    err = {f"{name}_err64": (res[name][0][0, 0].double() - ref).abs().max().item() for name in mods}

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hk != h)
    fns["cudnn"] = cudnn
    samples = {name: [] for name in fns}
    for r in range(int(os.environ.get("AB_ROUNDS", "5"))):
        for name in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            samples[name].append(triton.testing.do_bench(fns[name], warmup=50, rep=200, return_mode="median"))
    row = {"shape": (b, h, hk, n, d), "causal": causal,
           **{name: statistics.median(t) for name, t in samples.items()},
           **{f"{name}/head": statistics.median(a / c for a, c in zip(samples[name], samples["gf_head"]))
              for name in fns if name != "gf_head"},
           **err, **{f"{name}_equal": all(torch.equal(x, y) for x, y in zip(res[name], res["gf_head"])) for name in mods},
           **{f"{name}_maxdiff": max((x.float() - y.float()).abs().max().item() for x, y in zip(res[name], res["gf_head"])) for name in mods}}
    print({k_: (round(v_, 3) if isinstance(v_, float) else v_) for k_, v_ in row.items()}, flush=True)
    rows.append(row)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), os.environ.get("AB_NAME", "ab_fwd") + ".json"), "w"), indent=1)
