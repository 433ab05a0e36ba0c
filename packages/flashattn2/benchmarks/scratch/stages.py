"""Scratch (NOTES v38): the Hopper backward with a three-slot Q/dO/L/Delta ring (gbwd_stages3.py) against the package's
two slots: whole backward, alternating rounds; outputs bitwise equal (the order of every sum is unchanged)."""
import json, os, statistics, sys
import torch, triton
sys.path.insert(0, os.path.dirname(__file__))
import gbwd_stages3
import flashattn2._gluon_backward as shipped
from flashattn2._triton_forward import triton_forward

OUT = os.environ.get("OUT", ".")
SHAPES = [((2, 16, 4096, 64), True), ((4, 16, 4096, 64), True), ((4, 16, 4096, 64), False), ((1, 16, 16384, 64), True),
          ((1, 16, 16384, 64), False), ((1, 16, 32768, 64), True)]
rows = []
for shape, causal in SHAPES:
    torch.manual_seed(0)
    q, k, v, g = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = shape[-1] ** -0.5
    out, lse = triton_forward(q, k, v, causal, scale)
    ways = {name: mod.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, scale)
            for name, mod in (("2 slots", shipped), ("3 slots", gbwd_stages3))}
    grads = {name: [torch.empty_like(x) for x in (q, k, v)] for name in ways}
    run = lambda name: ways[name](g, q, k, v, out, lse, *grads[name])
    for name in ways:
        run(name)
    row = {"shape": shape, "causal": causal,
           "bitwise equal": all(torch.equal(a, b) for a, b in zip(grads["2 slots"], grads["3 slots"]))}
    samples = {name: [] for name in ways}
    for r in range(5):
        for name in sorted(ways, reverse=r % 2 == 1):
            samples[name].append(triton.testing.do_bench(lambda: run(name), return_mode="median"))
    row.update({n: statistics.median(t) for n, t in samples.items()})
    row["3 / 2"] = statistics.median(a / b for a, b in zip(samples["3 slots"], samples["2 slots"]))
    print(json.dumps({k_: (round(v_, 4) if isinstance(v_, float) else v_) for k_, v_ in row.items()}), flush=True)
    rows.append(row)
    json.dump(rows, open(f"{OUT}/stages.json", "w"), indent=1)
