"""Where the host time of one eager flash_attention forward+backward goes, at a tiny shape.

Usage (CUDA GPU, repository root)::

    PYTHONPATH=packages/flashattn2/src python packages/flashattn2/benchmarks/host_time.py

Host milliseconds per call (many calls enqueued, then one synchronization) of:
the launchers alone (forward; backward on the main thread and in a second Python
thread, as autograd runs it), the public API forward, and forward+backward
through ``torch.autograd.grad`` with autograd's device threads on and off; SDPA,
a plain ``x * 2`` and the same as a minimal Python autograd Function alongside
(what autograd's handling of a Python backward costs by itself). Then a
cProfile of the forward+backward, sorted by own time.
"""

from __future__ import annotations

import cProfile
import pstats
import threading

import torch
import torch.nn.functional as F
from matrix import host_ms  # this folder is on sys.path when run as a script

from flashattn2 import flash_attention
from flashattn2._triton_backward import triton_backward
from flashattn2._triton_forward import triton_forward

SHAPE = (1, 4, 128, 64)  # (B, H, N, D): GPU work of a few microseconds


class Twice(torch.autograd.Function):
    """The cheapest Python autograd Function: what autograd's handling of any Python backward costs."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


REPS = 300


def in_thread(fn) -> float:
    """:func:`host_ms` of ``fn`` measured in a second Python thread."""
    result = []
    thread = threading.Thread(target=lambda: result.append(host_ms(fn, REPS)))
    thread.start()
    thread.join()
    return result[0]


def main() -> None:
    q, k, v = (torch.randn(SHAPE, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn_like(q)
    scale = SHAPE[-1] ** -0.5
    o, lse = triton_forward(q, k, v, True, scale)
    cases = {
        "launcher fwd": lambda: triton_forward(q, k, v, True, scale),
        "launcher bwd": lambda: triton_backward(g, q, k, v, o, lse, True, scale),
        "api fwd, no grad": lambda: flash_attention(q.detach(), k.detach(), v.detach(), causal=True),
        "api fwd+bwd": lambda: torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), g),
        "sdpa fwd+bwd": lambda: torch.autograd.grad(
            F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), g
        ),
        "x * 2 fwd+bwd": lambda: torch.autograd.grad(q * 2, q, g),
        "Twice fwd+bwd": lambda: torch.autograd.grad(Twice.apply(q), q, g),
    }
    for name, fn in cases.items():
        print(f"{name:28} {host_ms(fn, REPS):.4f} ms/call", flush=True)
    print(f"{'launcher bwd, 2nd thread':28} {in_thread(cases['launcher bwd']):.4f} ms/call", flush=True)
    torch.autograd.set_multithreading_enabled(False)
    print(f"{'api fwd+bwd, 1 thread':28} {host_ms(cases['api fwd+bwd'], REPS):.4f} ms/call", flush=True)
    for name in ("sdpa fwd+bwd", "x * 2 fwd+bwd", "Twice fwd+bwd"):
        print(f"{name + ', 1 thread':28} {host_ms(cases[name], REPS):.4f} ms/call", flush=True)
    torch.autograd.set_multithreading_enabled(True)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(REPS):
        cases["api fwd+bwd"]()
    torch.cuda.synchronize()
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
