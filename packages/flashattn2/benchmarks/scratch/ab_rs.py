"""scratch (v170): the gb_rs_* backward variants (A operands from registers at head dim 64) against the package's
Hopper backward: backward kernels alone, CUDA-graph replays in alternating rounds (matrix.time_ms, about 40 ms of
calls a sample), then sustained: each way replayed for SUSTAIN_S seconds in turn, time per call from CUDA events.
Gradients compared bitwise with the package's, and between two calls of each way."""

import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import importlib

from matrix import time_ms

from flashattn2 import _gluon_backward as gb_head
from flashattn2 import _gluon_forward as gf

VARIANTS = os.environ.get("AB_VARIANTS", "dk:gb_rs_dk kv:gb_rs_kv both:gb_rs_both").split()
MODULES = {"head": gb_head} | {v.split(":")[0]: importlib.import_module(v.split(":")[1]) for v in VARIANTS}
SUSTAIN_S = float(os.environ.get("SUSTAIN_S", "1.5"))


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


def sustained_ms(fn, seconds):
    """ms per call while ``fn`` is replayed from a CUDA graph of 20 calls for about ``seconds``."""
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            for _ in range(20):
                fn()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    per_replay = start.elapsed_time(end) / 1000
    reps = max(1, int(seconds / per_replay))
    start.record()
    for _ in range(reps):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / (reps * 20)


def bench(shape, causal, kv_heads=None, rounds=int(os.environ.get("AB_ROUNDS", "5"))):
    b, h, n, d = shape
    q = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, kv_heads or h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    g = torch.randn_like(q)
    out, lse = torch.empty_like(q), torch.empty(b, h, n, device="cuda", dtype=torch.float32)
    gf.HopperForward(q.shape, k.shape, q.dtype, q.device, causal, d**-0.5)(q, k, v, out, lse)
    ways = {name: Way(mod, q, k, v, out, lse, g, causal) for name, mod in MODULES.items()}
    ref = [t.clone() for t in ways["head"]()]
    equal, repeat = {}, {}
    for name, way in ways.items():
        first = [t.clone() for t in way()]
        again = [t.clone() for t in way()]
        equal[name] = all(torch.equal(a, c) for a, c in zip(ref, first))
        repeat[name] = all(torch.equal(a, c) for a, c in zip(first, again))
    row = {"shape": shape, "kv_heads": kv_heads, "causal": causal, "bitwise_equal_to_head": equal,
           "repeat_equal": repeat}
    for kind in ("replays", "sustained"):
        samples = {w: [] for w in ways}
        for r in range(rounds if kind == "replays" else 3):
            order = list(ways) if r % 2 == 0 else list(ways)[::-1]
            for w in order:
                samples[w].append(time_ms(ways[w], True) if kind == "replays" else sustained_ms(ways[w], SUSTAIN_S))
        med = {w: statistics.median(s) for w, s in samples.items()}
        ratios = {w: statistics.median([a / c for a, c in zip(samples[w], samples["head"])]) for w in ways}
        row[kind] = {"ms": med, "to_head": ratios, "samples": samples}
        print(kind, shape, kv_heads, "causal" if causal else "full", {w: round(m, 4) for w, m in med.items()},
              {w: round(x, 4) for w, x in ratios.items()}, flush=True)
    print("equal", equal, "repeat", repeat, flush=True)
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
    ]
    if os.environ.get("AB_CAUSAL_ONLY"):
        shapes = [s for s in shapes if s[1]]
    rows = []
    for shape, causal, kv in shapes:
        rows.append(bench(shape, causal, kv))
        info = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
        json.dump(info, open(os.path.join(os.environ.get("OUT", "."), "ab_rs.json"), "w"), indent=1)
