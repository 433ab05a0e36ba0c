"""Session 27: why eager forward+backward at mid shapes reads 0.45-0.72x cuDNN: host time per call (calls enqueued,
one synchronization), do_bench eager, CUDA-graph replay, with the Hopper backward and with the Triton one,
and the kernels' GPU times by torch.profiler."""

import os
import time

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from flashattn2 import _triton_backward as tb
from flashattn2 import _triton_forward as tf
from flashattn2 import flash_attention


def host_ms(fn, reps=50):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / reps * 1e3


for shape, causal in (((1, 16, 2048, 128), True), ((4, 16, 1024, 128), False)):
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn_like(q)

    def ours():
        torch.autograd.grad(flash_attention(q, k, v, causal=causal), (q, k, v), g)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=causal), (q, k, v), g)

    res = {}
    for bwd in ("1", "0"):
        os.environ["FLASHATTN2_HOPPER_BACKWARD"] = bwd
        tf.forward_plan.cache_clear()
        tb.backward_plan.cache_clear()
        ours()
        name = "ours hopper-bwd" if bwd == "1" else "ours triton-bwd"
        res[name] = (host_ms(ours), triton.testing.do_bench(ours, warmup=50, rep=200, return_mode="median"))
    res["cudnn"] = (host_ms(cudnn), triton.testing.do_bench(cudnn, warmup=50, rep=200, return_mode="median"))
    print(shape, "causal" if causal else "full", flush=True)
    for n, (h, e) in res.items():
        print(f"  {n:16s} host/call {h:.3f} ms  do_bench eager {e:.3f}", flush=True)
    os.environ["FLASHATTN2_HOPPER_BACKWARD"] = "1"
    tf.forward_plan.cache_clear()
    tb.backward_plan.cache_clear()
    ours()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            ours()
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=8, max_name_column_width=60), flush=True)
