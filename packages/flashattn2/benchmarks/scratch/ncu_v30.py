"""Scratch (NOTES v30): one deterministic and one atomic-order launch of the v30 kernel (order 2, hv 259) for ncu."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import gbwd_v4 as gb

from flashattn2._triton_forward import triton_forward

b, h, n, d = 1, 16, 8192, 64
torch.manual_seed(0)
q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
o, lse = triton_forward(q, k, v, True, d ** -0.5)
for det in (True, False):
    gb.gluon_backward(g, q, k, v, o, lse, True, d ** -0.5, deterministic=det, order=2, hv=259)
torch.cuda.synchronize()
