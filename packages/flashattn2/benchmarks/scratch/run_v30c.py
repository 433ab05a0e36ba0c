"""Scratch (NOTES v30): deterministic order, L and Delta by TMA, with a 1 us polling back-off (hv 1024) against v26 (b)."""
import json, os, sys
import torch, triton
sys.path.insert(0, os.path.dirname(__file__))
import gbwd_v4 as gb
from flashattn2._triton_forward import triton_forward
from flashattn2._triton_backward import triton_backward

OUT = os.environ.get("OUT", ".")
bench = lambda f: triton.testing.do_bench(f, warmup=25, rep=150, return_mode="median")
V = [dict(hv=3), dict(hv=259), dict(hv=1283), dict(hv=1283, dq_bufs=4), dict(hv=1027)]
rows = []
for (b, h, n, d, causal) in [(1, 16, 16384, 64, True), (1, 16, 16384, 64, False), (1, 16, 8192, 64, True)]:
    torch.manual_seed(0)
    q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = d ** -0.5
    o, lse = triton_forward(q, k, v, causal, scale)
    delta = gb.delta_triton(o, g)
    row = {"shape": [b, h, n, d], "causal": causal}
    ref = gb.gluon_backward(g, q, k, v, o, lse, causal, scale, delta=delta, order=2, deterministic=True, **V[0])
    for kw in V[1:]:
        got = gb.gluon_backward(g, q, k, v, o, lse, causal, scale, delta=delta, order=2, deterministic=True, **kw)
        row["bitwise_equal_" + "_".join(f"{a}{int(b_)}" for a, b_ in kw.items())] = all(torch.equal(x, y) for x, y in zip(ref, got))
    for rep in range(2):
        row[f"triton_bwd_{rep}"] = bench(lambda: triton_backward(g, q, k, v, o, lse, causal, scale))
        for kw in V:
            name = "det_" + "_".join(f"{a}{int(b_)}" for a, b_ in kw.items()) + f"_{rep}"
            row[name] = bench(lambda: gb.gluon_backward(g, q, k, v, o, lse, causal, scale, delta=delta, order=2,
                                                        deterministic=True, **kw))
    print(json.dumps({k_: (round(v_, 3) if isinstance(v_, float) else v_) for k_, v_ in row.items()}), flush=True)
    rows.append(row)
    json.dump(rows, open(f"{OUT}/v30c-timing.json", "w"), indent=1)
