"""scratch (v154): the Hopper backward's launches, old (gb_old.py) or new, for ncu at base clocks:
python ncu_rows.py old|new [SHAPE_INDEX ...]. Each shape: one warm-up call, then 5 calls under cudaProfilerStart."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import gb_old
import gb_v1

from flashattn2 import _gluon_backward as gb_new
from flashattn2 import _gluon_forward as gf

mod = {"old": gb_old, "new": gb_new, "v1": gb_v1}[sys.argv[1]]
SHAPES = [
    ((1, 16, 16384, 64), True, None),
    ((1, 16, 16384, 64), False, None),
    ((1, 32, 16384, 64), True, 8),
    ((4, 16, 4096, 128), False, None),
    ((4, 16, 4096, 128), True, None),
]
for shape, causal, kv_heads in [SHAPES[int(i)] for i in sys.argv[2:]] or SHAPES[:4]:
    b, h, n, d = shape
    q = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, kv_heads or h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    g = torch.randn_like(q)
    out, lse = torch.empty_like(q), torch.empty(b, h, n, device="cuda", dtype=torch.float32)
    gf.HopperForward(q.shape, k.shape, q.dtype, q.device, causal, d**-0.5)(q, k, v, out, lse)
    bwd = mod.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, d**-0.5)
    grads = [torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)]
    bwd(g, q, k, v, out, lse, *grads)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for _ in range(5):
        bwd(g, q, k, v, out, lse, *grads)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print("done", shape, causal, kv_heads, flush=True)
