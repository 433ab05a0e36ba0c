"""scratch: the Hopper backward with per-warp mbarrier waits and arrives in its consumers (gb_pw.py) against the
package's (flashattn2._gluon_backward): backward kernels alone, CUDA-graph replays, alternating rounds, gradients
compared bitwise and against the package's."""

import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gb_pw
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


def bench(shape, causal, kv_heads=None, rounds=int(os.environ.get("AB_ROUNDS", "5"))):
    b, h, n, d = shape
    q = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, kv_heads or h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    g = torch.randn_like(q)
    out, lse = torch.empty_like(q), torch.empty(b, h, n, device="cuda", dtype=torch.float32)
    gf.HopperForward(q.shape, k.shape, q.dtype, q.device, causal, d**-0.5)(q, k, v, out, lse)
    ways = {"head": Way(gb_head, q, k, v, out, lse, g, causal), "pw": Way(gb_pw, q, k, v, out, lse, g, causal)}
    ref = [t.clone() for t in ways["head"]()]
    new = [t.clone() for t in ways["pw"]()]
    again = [t.clone() for t in ways["pw"]()]
    same = all(torch.equal(a, c) for a, c in zip(ref, new))
    repeat = all(torch.equal(a, c) for a, c in zip(new, again))
    samples = {w: [] for w in ways}
    for r in range(rounds):
        for w in list(ways) if r % 2 == 0 else list(ways)[::-1]:
            samples[w].append(time_ms(ways[w], True))
    med = {w: statistics.median(s) for w, s in samples.items()}
    ratios = [a / c for a, c in zip(samples["pw"], samples["head"])]
    row = {"shape": shape, "kv_heads": kv_heads, "causal": causal, "ms": med, "pw_to_head": statistics.median(ratios),
           "rounds": [round(x, 4) for x in ratios], "bitwise_equal_to_head": same, "repeat_equal": repeat}
    print("bench", shape, kv_heads, causal, {w: round(m, 4) for w, m in med.items()}, round(row["pw_to_head"], 4),
          row["rounds"], "equal" if same else "DIFFERENT", "repeat-equal" if repeat else "REPEAT-DIFFERS", flush=True)
    return row


if __name__ == "__main__":
    shapes = [
        ((1, 16, 16384, 64), True, None),
        ((1, 16, 16384, 64), False, None),
        ((2, 16, 8192, 64), True, None),
        ((4, 16, 4096, 64), True, None),
        ((4, 16, 4096, 64), False, None),
        ((16, 16, 2048, 64), True, None),
        ((1, 32, 16384, 64), True, 8),
        ((1, 16, 16383, 64), True, None),
        ((4, 16, 4096, 128), True, None),
        ((4, 16, 4096, 128), False, None),
    ]
    rows = []
    for shape, causal, kv in shapes:
        rows.append(bench(shape, causal, kv))
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows},
                  open(os.path.join(os.environ.get("OUT", "."), "ab_bwd.json"), "w"), indent=1)
