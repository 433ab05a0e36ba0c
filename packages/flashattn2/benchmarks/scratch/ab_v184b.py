"""scratch (v184, second A/B): the package's backward with v184's one dS fence (gb_fence1s's rule) against the
package before it (gb_prev, 3880a04), at the short causal head-dim-64 walks and at head dim 128, full (which the
rule also changes) and causal (which it leaves as it is). Adapted from ab_fence1.py: the head-dim-64 backward with both 64-query parts' dS stores under one fence and their dK
products after it where dK's dS^T comes from shared memory (gb_fence1u: the steps off the diagonal; gb_fence1s:
and the diagonal's where the walk is shorter than 8192 keys), against the package's: backward
kernels alone, CUDA-graph replays in alternating rounds, then sustained; gradients compared bitwise with the
package's, and between two calls."""

import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gb_prev
from matrix import time_ms

from flashattn2 import _gluon_backward as gb_head
from flashattn2 import _gluon_forward as gf

MODULES = {"head": gb_prev, "new": gb_head}
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
        ((4, 16, 4096, 128), False, None),
        ((4, 16, 4096, 128), True, None),
        ((2, 16, 8192, 128), False, None),
        ((16, 16, 2048, 64), True, None),
        ((8, 16, 1024, 64), True, None),
        ((4, 16, 4096, 64), True, None),
    ]
    shapes = shapes[: int(os.environ.get("AB_SHAPES", len(shapes)))]
    rows = []
    for shape, causal, kv in shapes:
        rows.append(bench(shape, causal, kv))
        info = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
        with open(os.path.join(os.environ.get("OUT", "."), "ab_v184b.json"), "w") as fh:
            json.dump(info, fh, indent=1)
