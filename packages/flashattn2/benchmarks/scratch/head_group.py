"""scratch: the persistent causal backward (head dim 64) dealing BACKWARD_HEAD_GROUP (batch, head) units at a time,
their items interleaved by key tile descending; replays, alternating; gradients bitwise equal across groups."""
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from matrix import time_ms

import flashattn2._hopper as hopper
import flashattn2._triton_backward as backward
import flashattn2._triton_forward as forward

WAYS = {"by_pair": 0, "interleaved": 1 << 40}  # the L2 size the plan sees
GROUP_SIZES = list(WAYS)
ROUNDS = int(os.environ.get("ROUNDS", "5"))


def measure(shape, kv_heads=None):
    b, h, n, d = shape
    q, g = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(b, kv_heads or h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    scale = d**-0.5
    out, lse = forward.triton_forward(q, k, v, True, scale)
    run = lambda: backward.triton_backward(g, q, k, v, out, lse, True, scale)  # noqa: E731
    samples = {w: [] for w in GROUP_SIZES}
    ref = None
    for r in range(ROUNDS):
        for w in sorted(GROUP_SIZES, reverse=r % 2 == 1):
            hopper.l2_cache_bytes = lambda device, size=WAYS[w]: size
            backward.backward_plan.cache_clear()
            grads = run()
            if r == 0:
                if ref is None:
                    ref = [x.clone() for x in grads]
                else:
                    assert all(torch.equal(a, c) for a, c in zip(ref, grads)), (shape, w, "not bitwise equal")
            samples[w].append(time_ms(run, True))
    base = GROUP_SIZES[0]
    row = {"shape": shape, "kv_heads": kv_heads, **{str(w): statistics.median(s) for w, s in samples.items()}}
    row["ratios"] = {str(w): statistics.median(a / c for a, c in zip(samples[w], samples[base])) for w in GROUP_SIZES[1:]}
    print(shape, kv_heads or "", f"G{base} {row[str(base)]:.3f}", {w: round(x, 3) for w, x in row["ratios"].items()}, flush=True)
    return row


rows = [measure(tuple(s)) for s in json.loads(os.environ["SHAPES"])]
json.dump(rows, open(os.path.join(os.environ["OUT"], "head_group.json"), "w"), indent=1)
