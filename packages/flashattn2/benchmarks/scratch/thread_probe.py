"""Session 27: eager forward+backward at (1, 16, 2048, 128) causal, Hopper backward and Triton backward, with
autograd's device threads on and off (the backward on the calling thread), do_bench medians."""

import os

import torch
import triton

from flashattn2 import _triton_backward as tb
from flashattn2 import _triton_forward as tf
from flashattn2 import flash_attention

shape, causal = (1, 16, 2048, 128), True
q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
g = torch.randn_like(q)


def ours():
    torch.autograd.grad(flash_attention(q, k, v, causal=causal), (q, k, v), g)


for threads in (True, False, True):
    torch.autograd.set_multithreading_enabled(threads)
    for flag in ("1", "0"):
        os.environ["FLASHATTN2_HOPPER_BACKWARD"] = flag
        tb.backward_plan.cache_clear()
        tf.forward_plan.cache_clear()
        ours()
        t = triton.testing.do_bench(ours, warmup=50, rep=200, return_mode="median")
        print(f"threads {threads} hopper-bwd {flag}: {t:.3f} ms", flush=True)
