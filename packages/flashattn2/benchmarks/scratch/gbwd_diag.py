"""Scratch: where the Gluon backward (gbwd_v2d) spends its time: dQ off (4 products), dQ computed but not handed over, full; 2 or 3 Q/dO stages."""
import json, os, sys
import torch, triton
sys.path.insert(0, os.path.dirname(__file__))
import gbwd_v2d as gb
from flashattn2._triton_forward import triton_forward
from flashattn2._triton_backward import triton_backward

bench = lambda f: triton.testing.do_bench(f, warmup=25, rep=150, return_mode="median")
rows = []
for (b, h, n, d, causal) in [(1, 16, 16384, 64, True), (1, 16, 16384, 64, False), (4, 16, 4096, 64, False)]:
    torch.manual_seed(0)
    q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = d ** -0.5
    o, lse = triton_forward(q, k, v, causal, scale)
    delta = (o.float() * g.float()).sum(-1)
    row = {"shape": [b, h, n, d], "causal": causal, "triton_bwd": bench(lambda: triton_backward(g, q, k, v, o, lse, causal, scale))}
    row["zeros_and_convert_only"] = bench(lambda: torch.zeros(b, h, n, d, device="cuda").to(torch.bfloat16))
    if os.environ.get("V25"):  # the dQ staging swizzle
        a = gb.gluon_backward(g, q, k, v, o, lse, causal, scale, deterministic=True, delta=delta)
        c = gb.gluon_backward(g, q, k, v, o, lse, causal, scale, deterministic=True, delta=delta, dq_swizzle=32)
        row["swizzle32_bitwise_equal_det"] = all(torch.equal(x, y) for x, y in zip(a, c))
        for det, sw in [(True, 0), (True, 32), (False, 0), (False, 32)]:
            row[f"det{int(det)}_dqswizzle{sw or 128}"] = bench(lambda: gb.gluon_backward(g, q, k, v, o, lse, causal, scale, deterministic=det, delta=delta, dq_swizzle=sw))
    else:
        for det, diag, stages, bufs in [(True, 0, 2, 2), (False, 0, 2, 2), (True, 0, 2, 4), (False, 0, 2, 4), (False, 2, 2, 2)]:
            row[f"det{int(det)}_diag{diag}_stages{stages}_dqbufs{bufs}"] = bench(lambda: gb.gluon_backward(g, q, k, v, o, lse, causal, scale, deterministic=det, delta=delta, diag=diag, stages=stages, dq_bufs=bufs))
    print(json.dumps(row), flush=True)
    rows.append(row)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "diag-swizzle.json" if os.environ.get("V25") else "diag.json"), "w"), indent=1)
