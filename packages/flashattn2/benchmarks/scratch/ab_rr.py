"""The causal Hopper backward with its tickets dealt CAUSAL_GROUP (batch, head) pairs at a time (gb_rr.py; 1 is the
package's order, head by head): kernel time (do_bench median, alternating rounds) and bitwise equality with group 1.
O and L are stand-ins (L = 10 keeps every exponential finite): the timing and the determinism do not depend on them."""
import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gb_rr

GROUPS = (1, 4, 16)
out_path = os.path.join(os.environ.get("OUT", "."), "2026-11-27-h100-s23-v97-causal-ticket-groups.json")
rows = []
for (b, h, hk, n, d) in [(1, 16, 16, 16384, 64), (4, 16, 16, 4096, 128), (8, 16, 16, 2048, 64), (2, 32, 8, 4096, 128)]:
    q, o, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    k, v = (torch.randn(b, hk, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    lse = torch.full((b, h, n), 10.0, device="cuda")
    fns, outs = {}, {}
    for G in GROUPS:
        gb_rr.CAUSAL_GROUP = G
        hb = gb_rr.HopperBackward(q.shape, k.shape, o.stride(), g.stride(), q.dtype, q.device, True, d**-0.5)
        res = (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v))
        fns[G] = lambda hb=hb, res=res: hb(g, q, k, v, o, lse, *res)
        fns[G]()
        torch.cuda.synchronize()
        outs[G] = [x.clone() for x in res]
    samples = {G: [] for G in GROUPS}
    for r in range(3):
        for G in (GROUPS if r % 2 == 0 else GROUPS[::-1]):
            samples[G].append(triton.testing.do_bench(fns[G], warmup=25, rep=150, return_mode="median"))
    row = {"shape": (b, h, hk, n, d), "ms": {G: round(statistics.median(t), 4) for G, t in samples.items()},
           "vs_1": {G: round(statistics.median(a / c for a, c in zip(samples[G], samples[1])), 4) for G in GROUPS},
           "bitwise_equal_to_1": {G: all(torch.equal(x, y) for x, y in zip(outs[G], outs[1])) for G in GROUPS}}
    print(row, flush=True)
    rows.append(row)
    json.dump(rows, open(out_path, "w"), indent=1)
