"""Scratch: two launches of the package's Hopper backward at (2, 16, 4096, 128) non-causal, for ncu (skip the first)."""
import torch

import flashattn2._gluon_backward as gb
from flashattn2._triton_forward import triton_forward

shape = (2, 16, 4096, 128)
torch.manual_seed(0)
q, k, v, g = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
out, lse = triton_forward(q, k, v, False, shape[-1] ** -0.5)
hb = gb.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, False, shape[-1] ** -0.5)
dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
for _ in range(2):
    hb(g, q, k, v, out, lse, dq, dk, dv)
torch.cuda.synchronize()
