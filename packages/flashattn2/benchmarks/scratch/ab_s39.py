"""scratch (session 39): the head-dim-64 three-consumer Hopper forward, the package against scratch variants (VARIANTS)
and cuDNN: forward only, CUDA-graph replays, alternating rounds;
errors of O against float64 at two small three-consumer shapes."""
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
import importlib

from matrix import time_ms

from flashattn2 import _gluon_forward as gf_pkg

# the variants to time against the package: VARIANTS=name:module,... (scratch modules beside this file)
MODULES = {"pkg": gf_pkg}
for pair in os.environ.get("VARIANTS", "ring:gf_ring").split(","):
    name, module = pair.split(":")
    MODULES[name] = importlib.import_module(module)


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
    errors = {}
    for name, mod in MODULES.items():
        way = Way(mod, q, k, v, causal)
        assert way.fwd.three_consumers, (name, shape, causal)
        out, _ = way()
        errors[name] = (out.double() - ref).abs().max().item()
    print("accuracy", shape, causal, errors, flush=True)
    return {"shape": shape, "causal": causal, "max_abs_error": errors}


def bench(shape, causal, kv_heads=None, rounds=5):
    q, k, v = inputs(shape, kv_heads)
    ways = {name: Way(mod, q, k, v, causal) for name, mod in MODULES.items()}
    base = [t.clone() for t in ways["pkg"]()]
    diffs = {}
    for name, way in ways.items():
        out = way()
        diffs[name] = (out[0].float() - base[0].float()).abs().max().item()

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv_heads is not None)

    ways["cudnn"] = cudnn
    samples = {w: [] for w in ways}
    for r in range(rounds):
        for w in list(ways) if r % 2 == 0 else list(ways)[::-1]:
            samples[w].append(time_ms(ways[w], True))
    med = {w: statistics.median(s) for w, s in samples.items()}
    ratios = {w: statistics.median(a / b for a, b in zip(samples[w], samples["pkg"])) for w in ways}
    row = {"shape": shape, "kv_heads": kv_heads, "causal": causal, "three": ways["pkg"].fwd.three_consumers,
           "ms": med, "to_pkg": ratios, "max_diff_to_pkg": diffs, "samples": samples}
    print("bench", shape, kv_heads, causal, row["three"], {w: round(m, 4) for w, m in med.items()},
          {w: round(x, 3) for w, x in ratios.items()}, flush=True)
    return row


if __name__ == "__main__":
    rounds = int(os.environ.get("ROUNDS", "5"))
    shapes = [((1, 16, 16384, 64), True, None), ((1, 16, 16384, 64), False, None), ((2, 16, 8192, 64), True, None),
              ((1, 32, 16384, 64), True, 8), ((8, 16, 2048, 64), False, None), ((2, 5, 5000, 64), True, None)]
    checks = [accuracy((1, 4, 6144, 64), True), accuracy((4, 4, 2048, 64), False)]
    if os.environ.get("SMOKE"):
        sys.exit(0)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
              "accuracy": checks, "bench": [bench(s, c, g, rounds) for s, c, g in shapes]}
    with open(os.path.join(os.environ["OUT"], os.environ.get("NAME", "s39-ab") + ".json"), "w") as fh:
        json.dump(result, fh, indent=1)

