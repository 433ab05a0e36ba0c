"""scratch (v166): the three-consumer Hopper forward with its product waits marked warp-group local (the package)
against the same forward without the mark (gf_old.py: HEAD's _gluon_forward.py, three consumers forced on) and
against two consumers (the package with its three-consumer thresholds out of reach), with cuDNN's forward beside
them: forward only, CUDA-graph replays, alternating rounds; outputs compared with the unmarked forward's."""

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
import gf_old
from matrix import time_ms

from flashattn2 import _gluon_forward as gf_new

gf_old.THREE_CONSUMER_TRITON = (triton.__version__,)
NEVER = {True: ((1 << 40, 0),), False: ((1 << 40, 0),)}


class Way:
    def __init__(self, mod, q, k, v, causal, two=False):
        b, h, n, d = q.shape
        saved = mod.THREE_CONSUMER_THRESHOLDS
        mod.THREE_CONSUMER_THRESHOLDS = NEVER if two else saved
        try:
            self.fwd = mod.HopperForward(q.shape, k.shape, q.dtype, q.device, causal, d**-0.5)
        finally:
            mod.THREE_CONSUMER_THRESHOLDS = saved
        self.out = torch.empty_like(q)
        self.lse = torch.empty(b, h, n, device=q.device, dtype=torch.float32)
        self.q, self.k, self.v = q, k, v

    def __call__(self):
        self.fwd(self.q, self.k, self.v, self.out, self.lse)
        return self.out, self.lse


def bench(shape, causal, kv_heads=None, rounds=5):
    b, h, n, d = shape
    q = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, kv_heads or h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    ways = {
        "old3": Way(gf_old, q, k, v, causal),
        "new3": Way(gf_new, q, k, v, causal),
        "two": Way(gf_new, q, k, v, causal, two=True),
    }
    three = (ways["old3"].fwd.three_consumers, ways["new3"].fwd.three_consumers, ways["two"].fwd.three_consumers)
    outs = {w: tuple(t.clone() for t in ways[w]()) for w in ways}
    same = all(torch.equal(a, b) for a, b in zip(outs["old3"], outs["new3"]))
    diff_two = (outs["two"][0].float() - outs["old3"][0].float()).abs().max().item()

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv_heads is not None)

    ways["cudnn"] = cudnn
    samples = {w: [] for w in ways}
    for r in range(rounds):
        for w in list(ways) if r % 2 == 0 else list(ways)[::-1]:
            samples[w].append(time_ms(ways[w], True))
    med = {w: statistics.median(s) for w, s in samples.items()}
    to_old = {w: statistics.median(a / b for a, b in zip(samples[w], samples["old3"])) for w in ways}
    row = {
        "shape": shape,
        "kv_heads": kv_heads,
        "causal": causal,
        "three_consumers": three,
        "ms": med,
        "to_old3": to_old,
        "new3_bitwise_equal_to_old3": same,
        "two_max_diff_to_old3": diff_two,
        "samples": samples,
    }
    print(
        "bench",
        shape,
        kv_heads,
        causal,
        three,
        {w: round(m, 4) for w, m in med.items()},
        {w: round(x, 3) for w, x in to_old.items()},
        "equal" if same else "NOT EQUAL",
        flush=True,
    )
    return row


if __name__ == "__main__":
    shapes = [
        ((1, 16, 16384, 64), True, None),
        ((1, 16, 16384, 64), False, None),
        ((2, 16, 8192, 64), True, None),
        ((1, 32, 16384, 64), True, 8),
        ((8, 16, 2048, 64), False, None),
        ((2, 5, 5000, 64), True, None),
    ]
    result = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "bench": [bench(s, c, g) for s, c, g in shapes],
    }
    with open(os.path.join(os.environ["OUT"], f"v166-ab-triton-{triton.__version__}.json"), "w") as fh:
        json.dump(result, fh, indent=1)
