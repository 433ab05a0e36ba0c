"""scratch (v167): under Triton 3.9, the Hopper backward with a warpgroup barrier before each consumer mbarrier
wait (gb_bar.py, as Triton 3.6 lowers them) against the package's: backward kernels alone, CUDA-graph replays,
alternating rounds, gradients compared bitwise."""

import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gb_bar
from matrix import time_ms

from flashattn2 import _gluon_backward as gb_head
from flashattn2 import _gluon_forward as gf


class Way:
    def __init__(self, mod, q, k, v, out, lse, g, causal):
        self.bwd = mod.HopperBackward(
            q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, q.shape[-1] ** -0.5
        )
        self.grads = [torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)]
        self.args = (g, q, k, v, out, lse)

    def __call__(self):
        self.bwd(*self.args, *self.grads)
        return self.grads


def bench(shape, causal, kv_heads=None, rounds=5):
    b, h, n, d = shape
    q = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, kv_heads or h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    g = torch.randn_like(q)
    out, lse = torch.empty_like(q), torch.empty(b, h, n, device="cuda", dtype=torch.float32)
    gf.HopperForward(q.shape, k.shape, q.dtype, q.device, causal, d**-0.5)(q, k, v, out, lse)
    ways = {"head": Way(gb_head, q, k, v, out, lse, g, causal), "bar": Way(gb_bar, q, k, v, out, lse, g, causal)}
    ref = [t.clone() for t in ways["head"]()]
    new = [t.clone() for t in ways["bar"]()]
    same = all(torch.equal(a, c) for a, c in zip(ref, new))
    samples = {w: [] for w in ways}
    for r in range(rounds):
        for w in list(ways) if r % 2 == 0 else list(ways)[::-1]:
            samples[w].append(time_ms(ways[w], True))
    med = {w: statistics.median(s) for w, s in samples.items()}
    ratios = [a / c for a, c in zip(samples["bar"], samples["head"])]
    row = {"shape": shape, "kv_heads": kv_heads, "causal": causal, "ms": med, "bar_to_head": statistics.median(ratios),
           "rounds": [round(x, 4) for x in ratios], "bitwise_equal_to_head": same}
    print("bench", shape, kv_heads, causal, {w: round(m, 4) for w, m in med.items()}, round(row["bar_to_head"], 4),
          row["rounds"], "equal" if same else "DIFFERENT", flush=True)
    return row


if __name__ == "__main__":
    shapes = [
        ((4, 16, 4096, 128), True, None),
        ((4, 16, 4096, 128), False, None),
        ((2, 32, 4096, 128), True, 8),
        ((1, 16, 16384, 64), True, None),
        ((1, 16, 16384, 64), False, None),
    ]
    rows = []
    for shape, causal, kv in shapes:
        rows.append(bench(shape, causal, kv))
        json.dump({"device": torch.cuda.get_device_name(), "triton": triton.__version__, "rows": rows},
                  open(os.path.join(os.environ.get("OUT", "."), "ab_bar.json"), "w"), indent=1)
