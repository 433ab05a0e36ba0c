"""Backward modules (argv[1:]) against gb_head, timed as CUDA-graph replays (do_bench_cudagraph), 7 alternating
rounds; outputs bitwise equal to gb_head's."""
import importlib, json, os, statistics, sys
sys.path.insert(0, os.path.dirname(__file__))
import torch, triton
from flashattn2._triton_forward import triton_forward

mods = {name: importlib.import_module(name) for name in ["gb_head", *sys.argv[1:]]}
rows = []
for b, h, hk, n, d, causal in [(1, 16, 16, 16384, 64, True), (4, 16, 16, 4096, 64, True), (8, 16, 16, 2048, 64, True),
                               (4, 16, 16, 4096, 128, True), (4, 16, 16, 4096, 128, False), (2, 32, 8, 4096, 128, True)]:
    q = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hk, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    g = torch.randn_like(q)
    out, lse = triton_forward(q, k, v, causal, d**-0.5)
    fns, res = {}, {}
    for name, mod in mods.items():
        hb = mod.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, d**-0.5)
        grads = [torch.empty_like(x) for x in (q, k, v)]
        fns[name] = (lambda hb=hb, grads=grads: hb(g, q, k, v, out, lse, *grads))
        fns[name]()
        res[name] = grads
    row = {"shape": (b, h, hk, n, d), "causal": causal}
    samples = {name: [] for name in mods}
    for r in range(7):
        for name in (list(mods) if r % 2 == 0 else list(mods)[::-1]):
            samples[name].append(triton.testing.do_bench_cudagraph(fns[name], rep=50, return_mode="median"))
    for name in mods:
        row["equal_" + name] = all(torch.equal(a, c) for a, c in zip(res["gb_head"], res[name]))
        row[name] = statistics.median(samples[name])
        if name != "gb_head":
            row[name + "_over_old"] = round(statistics.median(a / c for a, c in zip(samples[name], samples["gb_head"])), 4)
    print(json.dumps(row), flush=True)
    rows.append(row)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "ab_graph.json"), "w"), indent=1)
