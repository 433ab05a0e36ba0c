"""Session 27: eager forward+backward at (1, 16, 2048, 128) causal with the Hopper backward, its launches with
programmatic dependent launch as shipped and with it forced off, do_bench medians."""
import sys

import torch
import triton

from flashattn2 import _launch
from flashattn2 import _triton_backward as tb
from flashattn2 import _triton_forward as tf
from flashattn2 import flash_attention

if sys.argv[1] == "off":
    init = _launch.CompiledLaunch.__init__

    def no_pdl(self, *args, launch_pdl=False, **kwargs):
        init(self, *args, launch_pdl=False, **kwargs)

    _launch.CompiledLaunch.__init__ = no_pdl
q, k, v = (torch.randn(1, 16, 2048, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
g = torch.randn_like(q)


def ours():
    torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), g)


ours()
print(sys.argv[1], [round(triton.testing.do_bench(ours, warmup=50, rep=200, return_mode="median"), 3) for _ in range(3)])
