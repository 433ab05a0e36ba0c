"""Call overhead of flash_attention at short sequences, against the bare kernel launchers and SDPA.

Usage (CUDA GPU, repository root; FLASHATTN2_AUTOTUNE=0 as in BENCHMARKS.md)::

    PYTHONPATH=packages/flashattn2/src FLASHATTN2_AUTOTUNE=0 python packages/flashattn2/benchmarks/call_overhead.py

For B=1, H=16, D=64, bf16, causal at N=1024 and 4096 it prints, per way of calling,
the do_bench median (GPU time, which includes idle gaps when the host is the bottleneck)
and the host time per call (50 calls enqueued without synchronizing): the public API
with autograd, the launchers triton_forward/triton_backward called directly, and SDPA.
"""

from __future__ import annotations

import time
from typing import Callable

import torch
import torch.nn.functional as F
from triton.testing import do_bench

from flashattn2 import flash_attention
from flashattn2._triton_backward import triton_backward
from flashattn2._triton_forward import triton_forward

HEADS, HEAD_DIM = 16, 64
SCALE = HEAD_DIM**-0.5  # the default softmax scale, 1/sqrt(D)


def inputs(n: int) -> tuple[torch.Tensor, ...]:
    """q, k, v (B=1, H=16, N=n, D=64, bf16, requiring grad) and an output gradient, on the GPU."""
    q, k, v = (torch.randn(1, HEADS, n, HEAD_DIM, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    return q, k, v, torch.randn_like(q)


def host_ms_per_call(fn: Callable[[], object], reps: int, warmup: int = 0) -> tuple[float, float]:
    """Milliseconds per call of ``fn``: (host time to enqueue ``reps`` calls, the same up to their end on the GPU)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    enqueued = (time.perf_counter() - start) / reps * 1e3
    torch.cuda.synchronize()
    return enqueued, (time.perf_counter() - start) / reps * 1e3


def main() -> None:
    for n in (1024, 4096):
        q, k, v, g = inputs(n)
        ways = {
            "api fwd+bwd": lambda: torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), g),
            "raw fwd+bwd": lambda: triton_backward(g, q, k, v, *triton_forward(q, k, v, True, SCALE), True, SCALE),
            "raw fwd": lambda: triton_forward(q, k, v, True, SCALE),
            "sdpa fwd+bwd": lambda: torch.autograd.grad(
                F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), g),
        }
        for name, fn in ways.items():
            ms = do_bench(fn, warmup=50, rep=300, return_mode="median")
            host, _ = host_ms_per_call(fn, reps=50)
            print(f"N={n} {name:14} gpu-median {ms:.3f} ms   host-enqueue {host:.3f} ms/call", flush=True)


if __name__ == "__main__":
    main()
