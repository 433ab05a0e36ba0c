"""Scratch (run 2026-11-24, session 11): the causal Hopper backward's work order. fa4654e's module (gb_prev.py: key
tiles descending, walks from the diagonal up, zeroed workspace) against gb_longest_first.py (longest first over
groups of G (batch, head) pairs, walks down to the diagonal, key tiles adding in ascending order, the first add a
store), whole backward, 5 alternating rounds; outputs compared; the prologues timed."""
import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(__file__))
import gb_longest_first as new
import gb_prev as old

from flashattn2._triton_forward import triton_forward

SHAPES = [
    ((1, 16, 16384, 64), 16, True),
    ((4, 16, 4096, 128), 16, True),
    ((2, 32, 4096, 128), 8, True),
    ((4, 16, 4096, 64), 16, True),
    ((8, 16, 2048, 128), 16, True),
    ((1, 16, 32768, 64), 16, True),
    ((4, 16, 4096, 128), 16, False),
    ((1, 16, 16384, 64), 16, False),
]
GROUPS = (2, 4, 8, 16)
rows = []
for shape, kv, causal in SHAPES:
    torch.manual_seed(0)
    q, g = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(shape[0], kv, *shape[2:], device="cuda", dtype=torch.bfloat16) for _ in range(2))
    scale = shape[-1] ** -0.5
    out, lse = triton_forward(q, k, v, causal, scale)
    variants = {"old": old.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, scale)}
    for G in GROUPS if causal else (4,):
        hb = new.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, scale)
        hb.scalars = (*hb.scalars[:5], G, *hb.scalars[6:])
        variants[f"G{G}"] = hb
    if causal and kv < shape[1]:  # the group walk in the new order
        hb = new.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, scale)
        hb.per_query_head = False
        hb.grid = (triton.cdiv(shape[2], 128) * shape[0] * kv,)
        variants["G4_group_walk"] = hb
    fns, res, again = {}, {}, {}
    for name, hb in variants.items():
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        fns[name] = lambda hb=hb, dq=dq, dk=dk, dv=dv: hb(g, q, k, v, out, lse, dq, dk, dv)
        fns[name]()
        res[name] = [x.clone() for x in (dq, dk, dv)]
        fns[name]()
        again[name] = all(torch.equal(a, b) for a, b in zip((dq, dk, dv), res[name]))
    ref = res["old"]
    diff = {n_: [((a.float() - b.float()).abs().max() / b.float().abs().max()).item() for a, b in zip(r, ref)]
            for n_, r in res.items() if n_ != "old"}
    first_new = next(n_ for n_ in res if n_ != "old")
    bitwise_across_groups = {n_: all(torch.equal(a, b) for a, b in zip(r, res[first_new])) for n_, r in res.items()
                             if n_ != "old"}
    samples = {n_: [] for n_ in fns}
    names = list(fns)
    for r in range(5):
        for name in names if r % 2 == 0 else names[::-1]:
            samples[name].append(triton.testing.do_bench(fns[name], return_mode="median"))
    row = {"shape": shape, "kv_heads": kv, "causal": causal, "rel_max_diff_to_old_dq_dk_dv": diff,
           "bitwise_equal_to_" + first_new: bitwise_across_groups, "repeat_bitwise_equal": again,
           "ms": {n_: statistics.median(t) for n_, t in samples.items()},
           "over_old": {n_: statistics.median(a / b for a, b in zip(samples[n_], samples["old"])) for n_ in names}}
    print(json.dumps(row), flush=True)
    rows.append(row)

# The prologues alone: the old one (Delta, zeroed workspace, counters) against the new (Delta, counters).
prologues = []
for shape in ((1, 16, 16384, 64), (4, 16, 4096, 128)):
    q = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    o, g = torch.randn_like(q), torch.randn_like(q)
    hbo = old.HopperBackward(shape, shape, o.stride(), g.stride(), q.dtype, q.device, True, 0.1)
    hbn = new.HopperBackward(shape, shape, o.stride(), g.stride(), q.dtype, q.device, True, 0.1)
    delta = torch.empty(hbo.rows, device="cuda")
    acc = torch.empty(hbo.acc_shape, device="cuda")
    counters = torch.empty(hbo.counter_slots, dtype=torch.int32, device="cuda")
    t_old = triton.testing.do_bench(lambda: hbo.prologue(o, g, delta, acc, counters), return_mode="median")
    t_new = triton.testing.do_bench(lambda: hbn.prologue(o, g, delta, counters), return_mode="median")
    t_epi = triton.testing.do_bench(lambda: hbn.epilogue(acc, q), return_mode="median")
    prologues.append({"shape": shape, "prologue_old_ms": t_old, "prologue_new_ms": t_new, "epilogue_ms": t_epi})
    print(prologues[-1], flush=True)
json.dump({"rows": rows, "prologues": prologues}, open(os.path.join(os.environ.get("OUT", "."), "ab_order.json"), "w"),
          indent=1)
