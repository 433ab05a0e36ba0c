"""scratch (v182): the head-dim-64 forward with three K/V ring slots (gf_st3) against the package's two: forward
alone, CUDA-graph replays in alternating rounds, then sustained; outputs compared bitwise."""

import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gf_st3
from matrix import time_ms

from flashattn2 import _gluon_forward as gf_pkg

MODULES = {"pkg": gf_pkg, "st3": gf_st3}
SUSTAIN_S = float(os.environ.get("SUSTAIN_S", "1.5"))


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



class Way:
    def __init__(self, mod, q, k, v, causal):
        b, h, n, d = q.shape
        self.fwd = mod.HopperForward(q.shape, k.shape, q.dtype, q.device, causal, d**-0.5)
        self.out = torch.empty_like(q)
        self.lse = torch.empty(b, h, n, device=q.device, dtype=torch.float32)
        self.q, self.k, self.v = q, k, v

    def __call__(self):
        self.fwd(self.q, self.k, self.v, self.out, self.lse)
        return self.out, self.lse


def inputs(shape, kv_heads):
    b, h, n, d = shape
    q = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, kv_heads or h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    return q, k, v


def accuracy(shape, causal):
    q, k, v = inputs(shape, None)
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    errors = {name: (Way(mod, q, k, v, causal)()[0].double() - ref).abs().max().item() for name, mod in MODULES.items()}
    print("accuracy", shape, causal, errors, flush=True)
    return {"shape": shape, "causal": causal, "max_abs_error": errors}


def bench(shape, causal, kv_heads=None, rounds=5):
    q, k, v = inputs(shape, kv_heads)
    ways = {name: Way(mod, q, k, v, causal) for name, mod in MODULES.items()}
    three = ways["pkg"].fwd.three_consumers
    base = [t.clone() for t in ways["pkg"]()]
    equal = {name: all(torch.equal(a, c) for a, c in zip(base, way())) for name, way in ways.items()}

    row = {"shape": shape, "kv_heads": kv_heads, "causal": causal, "three": three, "bitwise_equal_to_pkg": equal}
    for kind in ("replays", "sustained"):
        samples = {w: [] for w in ways}
        for r in range(rounds if kind == "replays" else 2):
            for w in list(ways) if r % 2 == 0 else list(ways)[::-1]:
                samples[w].append(time_ms(ways[w], True) if kind == "replays" else sustained_ms(ways[w], SUSTAIN_S))
        med = {w: statistics.median(s) for w, s in samples.items()}
        ratios = {w: statistics.median(a / b for a, b in zip(samples[w], samples["pkg"])) for w in ways}
        row[kind] = {"ms": med, "to_pkg": ratios, "samples": samples}
        print(kind, shape, kv_heads, "causal" if causal else "full", "three" if three else "two",
              {w: round(m, 4) for w, m in med.items()}, {w: round(x, 4) for w, x in ratios.items()}, flush=True)
    print("equal", equal, flush=True)
    return row


if __name__ == "__main__":
    shapes = [((1, 16, 16384, 64), True, None), ((2, 16, 8192, 64), True, None), ((1, 32, 16384, 64), True, 8),
              ((1, 16, 16384, 64), False, None), ((16, 16, 2048, 64), True, None)]
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
              "accuracy": [accuracy((1, 4, 6144, 64), True)], "bench": []}
    for s, c, g in shapes:
        result["bench"].append(bench(s, c, g))
        with open(os.path.join(os.environ["OUT"], "ab_st3.json"), "w") as fh:
            json.dump(result, fh, indent=1)
