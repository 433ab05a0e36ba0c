"""Call overhead of flash_attention at short sequences, against the bare kernel launchers and SDPA.

Usage (CUDA GPU, repository root; FLASHATTN2_AUTOTUNE=0 as in BENCHMARKS.md)::

    PYTHONPATH=packages/flashattn2/src FLASHATTN2_AUTOTUNE=0 python packages/flashattn2/benchmarks/call_overhead.py

For B=1, H=16, D=64, bf16, causal at N=1024 and 4096 it prints, per way of calling,
the do_bench median (GPU time, which includes idle gaps when the host is the bottleneck)
and the host time per call (50 calls enqueued without synchronizing): the public API
with autograd, the launchers triton_forward/triton_backward called directly, and SDPA.
"""

import time, torch, torch.nn.functional as F
from triton.testing import do_bench
from flashattn2 import flash_attention
from flashattn2._triton_forward import triton_forward
from flashattn2._triton_backward import triton_backward
for n in (1024, 4096):
    q, k, v = (torch.randn(1, 16, n, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn_like(q)
    api = lambda: torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), g)
    raw = lambda: triton_backward(g, q, k, v, *triton_forward(q, k, v, True, 0.125), True, 0.125)
    fwd_raw = lambda: triton_forward(q, k, v, True, 0.125)
    sd = lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), g)
    for name, fn in (("api fwd+bwd", api), ("raw fwd+bwd", raw), ("raw fwd", fwd_raw), ("sdpa fwd+bwd", sd)):
        ms = do_bench(fn, warmup=50, rep=300, return_mode="median")
        torch.cuda.synchronize(); t = time.perf_counter()
        for _ in range(50):
            fn()
        host = (time.perf_counter() - t) / 50 * 1e3
        torch.cuda.synchronize()
        print(f"N={n} {name:14} gpu-median {ms:.3f} ms   host-enqueue {host:.3f} ms/call", flush=True)
