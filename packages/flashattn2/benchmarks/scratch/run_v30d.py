"""Scratch (NOTES v30): what one hop of the deterministic chain costs: release before the reduce completes (hv 2048),
no wait for the previous key tile (hv 4096); both diagnostics, not ordered. Order 2, Delta given."""
import json, os, sys
import torch, triton
sys.path.insert(0, os.path.dirname(__file__))
import gbwd_v4 as gb
from flashattn2._triton_forward import triton_forward

OUT = os.environ.get("OUT", ".")
bench = lambda f: triton.testing.do_bench(f, warmup=25, rep=150, return_mode="median")
V = [("v26b det", dict(hv=3, deterministic=True)), ("v30 det", dict(hv=259, deterministic=True)),
     ("v30 det, release before completion", dict(hv=2307, deterministic=True)),
     ("v30 det, no wait for the previous tile", dict(hv=4355, deterministic=True)),
     ("v30 det, neither", dict(hv=6403, deterministic=True)), ("v30 atomic", dict(hv=259, deterministic=False))]
rows = []
for (b, h, n, d, causal) in [(1, 16, 16384, 64, True), (1, 16, 16384, 64, False)]:
    torch.manual_seed(0)
    q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = d ** -0.5
    o, lse = triton_forward(q, k, v, causal, scale)
    delta = gb.delta_triton(o, g)
    row = {"shape": [b, h, n, d], "causal": causal}
    for rep in range(2):
        for name, kw in V:
            row[f"{name} ({rep})"] = bench(lambda: gb.gluon_backward(g, q, k, v, o, lse, causal, scale, delta=delta, order=2, **kw))
    print(json.dumps({k_: (round(v_, 3) if isinstance(v_, float) else v_) for k_, v_ in row.items()}), flush=True)
    rows.append(row)
    json.dump(rows, open(f"{OUT}/v30d-timing.json", "w"), indent=1)
