"""scratch (v150): the package's Hopper forward (three consumers at head dim 64 on long sequences, two elsewhere)
against the forward before the change (gf_old.py, HEAD's _gluon_forward.py) and cuDNN's: forward only, CUDA-graph
replays, alternating rounds; outputs compared with the old forward's."""
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


def bench(shape, causal, kv_heads=None, rounds=5):
    b, h, n, d = shape
    q = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, kv_heads or h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    ways = {"old": Way(gf_old, q, k, v, causal), "new": Way(gf_new, q, k, v, causal)}
    o_old, l_old = (t.clone() for t in ways["old"]())
    o_new, l_new = (t.clone() for t in ways["new"]())
    same = torch.equal(o_old, o_new) and torch.equal(l_old, l_new)
    diff = (o_old.float() - o_new.float()).abs().max().item()

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv_heads is not None)

    ways["cudnn"] = cudnn
    samples = {w: [] for w in ways}
    for r in range(rounds):
        for w in list(ways) if r % 2 == 0 else list(ways)[::-1]:
            samples[w].append(time_ms(ways[w], True))
    med = {w: statistics.median(s) for w, s in samples.items()}
    ratios = {w: statistics.median(a / b for a, b in zip(samples[w], samples["old"])) for w in ways}
    row = {"shape": shape, "kv_heads": kv_heads, "causal": causal, "three": ways["new"].fwd.three_consumers,
           "ms": med, "to_old": ratios, "bitwise_equal_to_old": same, "max_diff_to_old": diff, "samples": samples}
    print("bench", shape, kv_heads, causal, row["three"], {w: round(m, 4) for w, m in med.items()},
          {w: round(x, 3) for w, x in ratios.items()}, "equal" if same else f"diff {diff}", flush=True)
    return row


if __name__ == "__main__":
    shapes = [((1, 16, 16384, 64), True, None), ((1, 16, 16384, 64), False, None), ((2, 16, 8192, 64), True, None),
              ((1, 32, 16384, 64), True, 8), ((8, 16, 2048, 64), False, None), ((4, 16, 4096, 64), True, None),
              ((4, 16, 4096, 128), True, None), ((4, 16, 4096, 128), False, None), ((2, 16, 4096, 256), False, None),
              ((2, 16, 4096, 256), True, None)]
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
              "bench": [bench(s, c, g) for s, c, g in shapes]}
    with open(os.path.join(os.environ["OUT"], "v152-ab.json"), "w") as fh:
        json.dump(result, fh, indent=1)
