"""A/B of scratch Hopper backward modules (argv[1:]) against gb_head (the package's at HEAD): errors of each against
the float64 reference at small ragged shapes and bitwise equality with gb_head, then time (5 alternating rounds of
do_bench medians) at the benchmark shapes. AB_NAME names $OUT/ab-bwd-<name>.json; AB_D the head dim."""
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

mods = {"head": gb_head, **{m: importlib.import_module(m) for m in sys.argv[1:]}}
D = int(os.environ.get("AB_D", "128"))


def run(mod, q, k, v, g, out, lse, causal, scale):
    hb = mod.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, scale)
    grads = [torch.full_like(x, float("nan")) for x in (q, k, v)]
    fn = lambda: hb(g, q, k, v, out, lse, *grads)  # noqa: E731
    fn()
    torch.cuda.synchronize()
    return fn, [x.clone() for x in grads]


def inputs(b, h, hk, n, causal, d=D):
    q = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hk, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    g = torch.randn_like(q)
    out, lse = triton_forward(q, k, v, causal, d**-0.5)
    return q, k, v, g, out, lse


rows = []
for b, h, hk, n, causal in json.loads(os.environ["AB_CHECK"]) if "AB_CHECK" in os.environ else [(1, 3, 3, 1000, True), (1, 3, 3, 1000, False), (2, 4, 2, 700, True),
                            (2, 4, 2, 700, False), (1, 2, 2, 256, True), (1, 2, 1, 4000, True), (1, 2, 2, 4000, False),
                            (1, 2, 2, 2100, False), (1, 4, 1, 2048, False)]:
    q, k, v, g, out, lse = inputs(b, h, hk, n, causal)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    o64 = naive_attention(q64, k64, v64, causal=causal)[0]
    ref = torch.autograd.grad(o64, (q64, k64, v64), g.double())
    res = {name: run(mod, q, k, v, g, out, lse, causal, D**-0.5)[1] for name, mod in mods.items()}
    rep = {name: run(mod, q, k, v, g, out, lse, causal, D**-0.5)[1] for name, mod in mods.items()}
    row = {"shape": (b, h, hk, n, D), "causal": causal,
           "err": {name: [attention_error(x, r) for x, r in zip(gr, ref)] for name, gr in res.items()},
           "bitwise_equal_head": {name: all(torch.equal(a, c) for a, c in zip(gr, res["head"])) for name, gr in res.items()},
           "repeat_equal": {name: all(torch.equal(a, c) for a, c in zip(gr, rep[name])) for name, gr in res.items()}}
    print(row, flush=True)
    rows.append(row)

for b, h, hk, n, causal in json.loads(os.environ.get("AB_SHAPES", "[[4,16,16,4096,false],[4,16,16,4096,true]]")):
    q, k, v, g, out, lse = inputs(b, h, hk, n, causal)
    fns, res = {}, {}
    for name, mod in mods.items():
        fns[name], res[name] = run(mod, q, k, v, g, out, lse, causal, D**-0.5)
    samples = {name: [] for name in mods}
    names = list(mods)
    for r in range(int(os.environ.get("AB_ROUNDS", "5"))):
        for name in (names if r % 2 == 0 else names[::-1]):
            samples[name].append(triton.testing.do_bench(fns[name], return_mode="median"))
    row = {"shape": (b, h, hk, n, D), "causal": causal,
           "bitwise_equal_head": {name: all(torch.equal(a, c) for a, c in zip(gr, res["head"])) for name, gr in res.items()},
           "ms": {name: statistics.median(t) for name, t in samples.items()},
           "over_head": {name: statistics.median(a / c for a, c in zip(samples[name], samples["head"])) for name in names},
           "samples": samples}
    print(row, flush=True)
    rows.append(row)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), f"ab-bwd-{os.environ.get('AB_NAME', 'x')}.json"), "w"), indent=1)
