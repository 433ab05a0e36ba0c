"""A/B of a scratch Hopper backward module (argv[1], default gb128) against gb_head (the package's at HEAD):
errors of both against the float64 reference at small ragged shapes, bitwise equality and time (5 alternating
rounds of do_bench medians) at the benchmark shapes."""
import importlib
import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(__file__))
import gb_head

from flashattn2._triton_forward import triton_forward
from flashattn2.testing import attention_error, naive_attention

new = importlib.import_module(sys.argv[1] if len(sys.argv) > 1 else "gb128")
D = 64


def run(mod, q, k, v, g, out, lse, causal, scale):
    hb = mod.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, scale)
    grads = [torch.empty_like(x) for x in (q, k, v)]
    fn = lambda: hb(g, q, k, v, out, lse, *grads)  # noqa: E731
    fn()
    return fn, [x.clone() for x in grads]


def inputs(b, h, hk, n, causal, d=D):
    torch.manual_seed(n + h + causal)
    q = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hk, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    g = torch.randn_like(q)
    out, lse = triton_forward(q, k, v, causal, d**-0.5)
    return q, k, v, g, out, lse


rows = []
for b, h, hk, n, causal in [(1, 3, 3, 1000, True), (1, 3, 3, 1000, False), (2, 4, 2, 700, True),
                            (2, 4, 2, 700, False), (1, 2, 2, 256, True), (1, 2, 1, 4000, True)]:
    q, k, v, g, out, lse = inputs(b, h, hk, n, causal)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    o64 = naive_attention(q64, k64, v64, causal=causal)[0]
    ref = torch.autograd.grad(o64, (q64, k64, v64), g.double())
    errs = {}
    for name, mod in (("old", gb_head), ("new", new)):
        _, grads = run(mod, q, k, v, g, out, lse, causal, D**-0.5)
        errs[name] = [attention_error(x, r) for x, r in zip(grads, ref)]
        errs[name + "_grads"] = grads
    row = {"shape": (b, h, hk, n, D), "causal": causal, "err_old": errs["old"], "err_new": errs["new"],
           "bitwise_equal": all(torch.equal(a, c) for a, c in zip(errs["old_grads"], errs["new_grads"]))}
    print(row, flush=True)
    rows.append(row)

for b, h, hk, n, causal, d in [(1, 16, 16, 16384, True, 64), (1, 16, 16, 16384, False, 64),
                               (4, 16, 16, 4096, True, 64), (4, 16, 16, 4096, False, 64), (2, 16, 16, 4096, True, 64),
                               (8, 16, 16, 2048, True, 64), (8, 16, 16, 2048, False, 64),
                               (2, 16, 4, 8192, True, 64), (2, 16, 4, 8192, False, 64),
                               (4, 16, 16, 4096, True, 128)]:
    q, k, v, g, out, lse = inputs(b, h, hk, n, causal, d)
    fns, res = {}, {}
    for name, mod in (("old", gb_head), ("new", new)):
        fns[name], res[name] = run(mod, q, k, v, g, out, lse, causal, d**-0.5)
    equal = all(torch.equal(a, c) for a, c in zip(res["old"], res["new"]))
    diff = max((a.float() - c.float()).abs().max().item() for a, c in zip(res["old"], res["new"]))
    samples = {"old": [], "new": []}
    for r in range(5):
        for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
            samples[name].append(triton.testing.do_bench(fns[name], return_mode="median"))
    row = {"shape": (b, h, hk, n, d), "causal": causal, "bitwise_equal": equal, "max_diff": diff,
           **{k_: statistics.median(t) for k_, t in samples.items()},
           "new_over_old": statistics.median(a / c for a, c in zip(samples["new"], samples["old"]))}
    print(row, flush=True)
    rows.append(row)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), f"ab_{new.__name__}.json"), "w"), indent=1)
