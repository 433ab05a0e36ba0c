"""scratch (v154): the Hopper backward with L and Delta from the prologue's per-tile row_stats (one TMA load, any
length) against the backward before (gb_old.py, HEAD's _gluon_backward.py): backward kernels alone, CUDA-graph
replays, alternating rounds, gradients compared bitwise. Then, at lengths not multiples of 4, forward+backward
with the Hopper backward against the Triton kernels that took those lengths before (eager calls)."""

import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
import gb_old
from matrix import time_ms

import flashattn2._triton_backward as backward
from flashattn2 import _gluon_backward as gb_new
from flashattn2 import _gluon_forward as gf
from flashattn2 import flash_attention


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
    ways = {"old": Way(gb_old, q, k, v, out, lse, g, causal), "new": Way(gb_new, q, k, v, out, lse, g, causal)}
    old = [t.clone() for t in ways["old"]()]
    new = [t.clone() for t in ways["new"]()]
    same = all(torch.equal(a, c) for a, c in zip(old, new))
    samples = {w: [] for w in ways}
    for r in range(rounds):
        for w in list(ways) if r % 2 == 0 else list(ways)[::-1]:
            samples[w].append(time_ms(ways[w], True))
    med = {w: statistics.median(s) for w, s in samples.items()}
    ratio = statistics.median(a / c for a, c in zip(samples["new"], samples["old"]))
    row = {
        "shape": shape,
        "kv_heads": kv_heads,
        "causal": causal,
        "ms": med,
        "new_to_old": ratio,
        "bitwise_equal_to_old": same,
        "samples": samples,
    }
    print(
        "bench",
        shape,
        kv_heads,
        causal,
        {w: round(m, 4) for w, m in med.items()},
        round(ratio, 4),
        "equal" if same else "DIFFERENT",
        flush=True,
    )
    return row


def odd(shape, causal, rounds=5):
    """forward+backward at a length the Hopper backward did not take before: Hopper backward vs Triton kernels"""
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn_like(q)

    def step():
        torch.autograd.grad(flash_attention(q, k, v, causal=causal), (q, k, v), g)

    samples = {"hopper": [], "triton": []}
    paths = {}
    for r in range(rounds):
        for w in ("hopper", "triton") if r % 2 == 0 else ("triton", "hopper"):
            os.environ["FLASHATTN2_HOPPER_BACKWARD"] = "1" if w == "hopper" else "0"
            backward.backward_plan.cache_clear()
            paths[w] = backward.plan_for(q, q, k, v, q, causal, shape[-1] ** -0.5).hopper is not None
            samples[w].append(time_ms(step))
    os.environ.pop("FLASHATTN2_HOPPER_BACKWARD")
    med = {w: statistics.median(s) for w, s in samples.items()}
    ratio = statistics.median(a / c for a, c in zip(samples["hopper"], samples["triton"]))
    print("odd", shape, causal, paths, {w: round(m, 4) for w, m in med.items()}, round(ratio, 4), flush=True)
    return {
        "shape": shape,
        "causal": causal,
        "hopper_path": paths,
        "ms": med,
        "hopper_to_triton": ratio,
        "samples": samples,
    }


if __name__ == "__main__":
    shapes = [
        ((1, 16, 16384, 64), True, None),
        ((1, 16, 16384, 64), False, None),
        ((4, 16, 4096, 128), True, None),
        ((4, 16, 4096, 128), False, None),
        ((1, 32, 16384, 64), True, 8),
        ((2, 16, 4096, 256), True, None),
        ((2, 16, 4096, 256), False, None),
        ((16, 16, 2048, 64), True, None),
    ]
    result = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "bench": [bench(s, c, g) for s, c, g in shapes],
    }
    result["odd"] = [
        odd(s, c)
        for s, c in [
            ((16, 16, 2049, 64), True),
            ((1, 16, 16383, 64), True),
            ((2, 16, 4099, 128), True),
            ((4, 16, 4097, 128), False),
        ]
    ]
    with open(os.path.join(os.environ["OUT"], "v154-ab.json"), "w") as fh:
        json.dump(result, fh, indent=1)
