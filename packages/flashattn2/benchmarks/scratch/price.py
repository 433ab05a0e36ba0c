"""Scratch (NOTES v37): the price of determinism of the Hopper backward: fixed order (the package) against atomic
order (gbwd_atomic.py), the whole backward (prologue, kernel, epilogue), alternating rounds; atomic order's run-to-run
bitwise differences."""
import json, os, statistics, sys
import torch, triton
sys.path.insert(0, os.path.dirname(__file__))
import gbwd_atomic
import flashattn2._gluon_backward as fixed
from flashattn2._triton_forward import triton_forward

OUT = os.environ.get("OUT", ".")
SHAPES = [((2, 16, 4096, 64), True), ((4, 16, 4096, 64), True), ((4, 16, 4096, 64), False), ((1, 16, 8192, 64), True),
          ((2, 16, 8192, 64), False), ((1, 16, 16384, 64), True), ((1, 16, 16384, 64), False), ((1, 16, 32768, 64), True)]
rows = []
for shape, causal in SHAPES:
    torch.manual_seed(0)
    q, k, v, g = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = shape[-1] ** -0.5
    out, lse = triton_forward(q, k, v, causal, scale)
    ways = {name: mod.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, scale)
            for name, mod in (("fixed", fixed), ("atomic", gbwd_atomic))}
    grads = {name: [torch.empty_like(x) for x in (q, k, v)] for name in ways}
    run = lambda name: ways[name](g, q, k, v, out, lse, *grads[name])
    samples = {name: [] for name in ways}
    for r in range(5):
        for name in sorted(ways, reverse=r % 2 == 1):
            samples[name].append(triton.testing.do_bench(lambda: run(name), return_mode="median"))
    row = {"shape": shape, "causal": causal, **{n: statistics.median(t) for n, t in samples.items()},
           "fixed / atomic": statistics.median(a / b for a, b in zip(samples["fixed"], samples["atomic"]))}
    for name in ways:
        run(name); first = [x.clone() for x in grads[name]]
        same = True
        for _ in range(4):
            run(name); same = same and all(torch.equal(a, b) for a, b in zip(first, grads[name]))
        row[f"{name} bitwise same x5"] = same
    run("atomic"); a = [x.clone() for x in grads["atomic"]]; run("fixed")
    row["max |dq fixed - dq atomic|"] = (a[0].float() - grads["fixed"][0].float()).abs().max().item()
    print(json.dumps({k_: (round(v_, 4) if isinstance(v_, float) else v_) for k_, v_ in row.items()}), flush=True)
    rows.append(row)
    json.dump(rows, open(f"{OUT}/price-of-determinism.json", "w"), indent=1)
