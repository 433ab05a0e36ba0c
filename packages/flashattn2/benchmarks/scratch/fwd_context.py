"""scratch (v121): the causal forward's two orders (groups of four pairs, all pairs) timed in three contexts by
CUDA-graph replays: after itself (warm), after an L2 flush (cold), after the backward (as in forward+backward
replays), each minus the graph of what precedes it."""
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from matrix import time_ms  # noqa: E402

import flashattn2._gluon_forward as gf  # noqa: E402
import flashattn2._triton_backward as backward  # noqa: E402
import flashattn2._triton_forward as forward  # noqa: E402

ORDERS = {"group4": 0.0, "all": 0.5}


def run(shape, rounds=5):
    q, k, v, g = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = shape[-1] ** -0.5
    out, lse = forward.triton_forward(q, k, v, True, scale)
    flush = torch.empty(128 * 2**20, dtype=torch.int8, device="cuda")

    def f():
        forward.triton_forward(q, k, v, True, scale)

    def b():
        backward.triton_backward(g, q, k, v, out, lse, True, scale)

    def x():
        flush.zero_()

    def xf():
        x()
        f()

    def bf():
        b()
        f()

    graphs = {"f": f, "x": x, "xf": xf, "b": b, "bf": bf}
    samples = {o: {name: [] for name in graphs} for o in ORDERS}
    for r in range(rounds):
        for o in list(ORDERS) if r % 2 == 0 else list(ORDERS)[::-1]:
            gf.ALL_PAIRS_L2_SHARE = ORDERS[o]
            forward.forward_plan.cache_clear()
            for name, fn in graphs.items():
                samples[o][name].append(time_ms(fn, True))
    row = {"shape": shape, "samples": samples}
    for o in ORDERS:
        m = {name: statistics.median(s) for name, s in samples[o].items()}
        m["fwd_warm"], m["fwd_cold"], m["fwd_after_bwd"] = m["f"], m["xf"] - m["x"], m["bf"] - m["b"]
        row[o] = m
        print(shape, o, {k: round(val * 1000, 1) for k, val in m.items()}, "us", flush=True)
    return row


if __name__ == "__main__":
    rows = [run(s) for s in [(2, 16, 1024, 128), (1, 16, 2048, 128), (1, 16, 2048, 64), (2, 16, 2048, 64)]]
    gf.ALL_PAIRS_L2_SHARE = 0.5
    with open(os.path.join(os.environ["OUT"], "fwd_context.json"), "w") as fh:
        json.dump(rows, fh, indent=1)
