"""scratch: the one-item causal backward's ticket order, GROUP units interleaved (CAUSAL_TICKET_GROUP), by replays;
gradients must be bitwise equal across groups."""
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from matrix import time_ms  # noqa: E402

import flashattn2._gluon_backward as gb  # noqa: E402
import flashattn2._triton_backward as backward  # noqa: E402
import flashattn2._triton_forward as forward  # noqa: E402
from flashattn2._hopper import below_thresholds  # noqa: E402

GROUPS = [int(g) for g in os.environ.get("GROUPS", "1,4,16,65536").split(",")]


def measure(shape, causal=True, kv_heads=None, rounds=3):
    b, h, n, d = shape
    q, g = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(b, kv_heads or h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    scale = d**-0.5
    out, lse = forward.triton_forward(q, k, v, causal, scale)
    run = lambda: backward.triton_backward(g, q, k, v, out, lse, causal, scale)  # noqa: E731
    samples = {w: [] for w in GROUPS}
    ref = None
    for r in range(rounds):
        for w in sorted(GROUPS, reverse=r % 2 == 1):
            gb.CAUSAL_TICKET_GROUP = w
            backward.backward_plan.cache_clear()
            grads = run()
            if r == 0:
                if ref is None:
                    ref = [x.clone() for x in grads]
                else:
                    assert all(torch.equal(a, c) for a, c in zip(ref, grads)), (shape, w, "not bitwise equal")
            samples[w].append(time_ms(run, True))
    row = {"shape": shape, "kv_heads": kv_heads, **{str(w): statistics.median(s) for w, s in samples.items()}}
    ratios = {w: statistics.median(a / c for a, c in zip(samples[w], samples[GROUPS[0]])) for w in GROUPS[1:]}
    row["ratios"] = {str(w): x for w, x in ratios.items()}
    print(shape, kv_heads or "", f"G{GROUPS[0]} {row[str(GROUPS[0])]:.3f}", {w: round(x, 3) for w, x in ratios.items()}, flush=True)
    return row


SHAPES = json.loads(os.environ["SHAPES"])  # [[B, H, N, D], ...]
rows = []
with below_thresholds():
    for shape in SHAPES:
        rows.append(measure(tuple(shape), rounds=int(os.environ.get("ROUNDS", "3"))))
json.dump(rows, open(os.path.join(os.environ["OUT"], "ticket.json"), "w"), indent=1)
