"""A/B of scratch Hopper forward modules against the package's (flashattn2._gluon_forward), each at the head dims
it is named for (gf_pw256: 256, gf_pw128: 128): max error against float64 on the last head, max difference to the
package's output, and time (alternating rounds of do_bench medians) with cuDNN's forward in the same rounds."""
import importlib
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
HEAD = importlib.import_module("flashattn2._gluon_forward")
# AB_MODS: the scratch modules to run (default: gf_pw<D> at head dim D)
NAMED = [name for name in os.environ.get("AB_MODS", "").split(",") if name]
ALL = {name: importlib.import_module(name) for name in NAMED}
SHAPES = [(2, 16, 16, 4096, 256, False), (2, 16, 16, 4096, 256, True), (4, 16, 16, 2048, 256, False),
          (1, 16, 16, 8192, 256, False), (8, 16, 16, 1024, 256, True), (1, 5, 5, 2000, 256, False),
          (4, 16, 16, 4096, 128, False), (4, 16, 16, 4096, 128, True), (8, 16, 16, 1024, 128, True),
          (1, 16, 16, 16384, 128, True), (2, 16, 16, 8192, 128, False), (2, 16, 4, 4096, 128, True),
          (1, 5, 5, 2000, 128, False)]
rows = []
DIMS = [int(x) for x in os.environ.get("AB_DIMS", "128,256").split(",")]
for b, h, hk, n, d, causal in [x for x in SHAPES if x[4] in DIMS]:
    mods = {"head": HEAD, **ALL} if ALL else {"head": HEAD, "pw": importlib.import_module(f"gf_pw{d}")}
    torch.manual_seed(0)
    q = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hk, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    fns, res = {}, {}
    for name, mod in mods.items():
        hf = mod.HopperForward(q.shape, k.shape, q.dtype, q.device, causal, d**-0.5)
        out, lse = torch.full_like(q, float("nan")), torch.full((b, h, n), float("nan"), device="cuda")
        fns[name] = lambda hf=hf, out=out, lse=lse: hf(q, k, v, out, lse)
        fns[name]()
        torch.cuda.synchronize()
        res[name] = (out.clone(), lse.clone())
    qh, kh, vh = (x[-1, -1].double() for x in (q, k, v))
    sc = (qh @ kh.T) * d**-0.5
    if causal:
        sc = sc.masked_fill(torch.ones(n, n, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    ref, ref_lse = torch.softmax(sc, -1) @ vh, torch.logsumexp(sc, -1)
    err = {f"{name}_err64": (res[name][0][-1, -1].double() - ref).abs().max().item() for name in mods}
    err.update({f"{name}_lse_err64": (res[name][1][-1, -1].double() - ref_lse).abs().max().item() for name in mods})

    ke, ve = (x.repeat_interleave(h // hk, 1) for x in (k, v))  # cuDNN's heads, one per query head

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, ke, ve, is_causal=causal)

    fns["cudnn"] = cudnn
    samples = {name: [] for name in fns}
    for r in range(int(os.environ.get("AB_ROUNDS", "5"))):
        for name in list(fns) if r % 2 == 0 else list(fns)[::-1]:
            samples[name].append(triton.testing.do_bench(fns[name], warmup=25, rep=150, return_mode="median"))
    row = {
        "shape": (b, h, hk, n, d), "causal": causal,
        **{name: statistics.median(t) for name, t in samples.items()},
        **{f"{name}/head": statistics.median(a / c for a, c in zip(samples[name], samples["head"]))
           for name in fns if name != "head"},
        **{f"{name}_rounds/head": [round(a / c, 3) for a, c in zip(samples[name], samples["head"])]
           for name in mods if name != "head"},
        **err,
        **{f"{name}_maxdiff": max((x.float() - y.float()).abs().max().item() for x, y in zip(res[name], res["head"]))
           for name in mods},
        **{f"{name}_finite": bool(res[name][0].isfinite().all()) for name in mods},
    }
    print({k_: (round(v_, 4) if isinstance(v_, float) else v_) for k_, v_ in row.items()}, flush=True)
    rows.append(row)
    json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), f"ab_pw{os.environ.get('AB_DIMS', '')}.json"), "w"), indent=1)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), f"ab_pw{os.environ.get('AB_DIMS', '')}.json"), "w"), indent=1)
