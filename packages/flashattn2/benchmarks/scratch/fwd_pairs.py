"""The causal Hopper forward at D = 64 with head groups of G pairs (a kernel scalar) against the Triton forward:
do_bench medians, five alternating rounds, ratio = median of the rounds' ratios to the Triton forward."""
import json
import os
import statistics

import torch
import triton

import flashattn2._gluon_forward as gf
import flashattn2._triton_forward as forward

GROUPS = [4]
rows = []
for b, h, n in [(1, 16, 4096), (1, 32, 4096), (2, 32, 4096), (8, 16, 4096), (2, 16, 8192), (8, 16, 8192), (2, 16, 16384), (4, 16, 16384), (8, 16, 16384), (1, 8, 16384), (1, 16, 2048), (2, 16, 2048),
                (1, 32, 8192)]:
    d = 64
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    fns = {}
    os.environ["FLASHATTN2_HOPPER_FORWARD"] = "0"
    forward.forward_plan.cache_clear()
    fns["triton"] = lambda: forward.triton_forward(q, k, v, True, d**-0.5)
    fns["triton"]()
    outs = {}
    for g in GROUPS:
        hf = gf.HopperForward(q.shape, k.shape, q.dtype, q.device, True, d**-0.5)
        sc = list(hf.scalars)
        sc[3] = min(g, b * h)
        hf.scalars = tuple(sc)
        out, lse = torch.empty_like(q), torch.empty(b, h, n, device="cuda")
        fns[f"G{g}"] = lambda hf=hf, out=out, lse=lse: hf(q, k, v, out, lse)
        fns[f"G{g}"]()
        outs[g] = out.clone()
    samples = {name: [] for name in fns}
    for r in range(5):
        for name in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            samples[name].append(triton.testing.do_bench(fns[name], warmup=50, rep=200, return_mode="median"))
    row = {"shape": (b, h, n, d), "triton": statistics.median(samples["triton"]),
           **{name: statistics.median(a / t for a, t in zip(samples[name], samples["triton"])) for name in fns if name != "triton"},
           "equal": all(torch.equal(outs[g], outs[4]) for g in GROUPS)}
    print({k_: (round(v_, 3) if isinstance(v_, float) else v_) for k_, v_ in row.items()}, flush=True)
    rows.append(row)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "fwd_pairs.json"), "w"), indent=1)
