"""Where the host time of one flash_attention forward+backward goes (B=1, H=16, N=1024, D=64, bf16, causal).

Usage (CUDA GPU, repository root)::

    PYTHONPATH=packages/flashattn2/src FLASHATTN2_AUTOTUNE=0 python packages/flashattn2/benchmarks/host_time.py

Host milliseconds per call of: the forward and backward launchers alone, the API
forward (with and without autograd), the API forward plus torch.autograd.grad; the
backward launcher run from a second Python thread (autograd runs CUDA backward
functions on its own device thread); the API with autograd multithreading off; and
a cProfile of the backward launcher (Triton launch internals).
"""

from __future__ import annotations

import cProfile
import pstats
import threading

import torch

from call_overhead import SCALE, host_ms_per_call, inputs  # this folder is on sys.path when run as a script
from flashattn2 import flash_attention
from flashattn2._triton_backward import triton_backward
from flashattn2._triton_forward import triton_forward

REPS, WARMUP = 200, 10


def in_thread(fn) -> tuple[float, float]:
    """:func:`host_ms_per_call` of ``fn`` measured in a second Python thread."""
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("ms", host_ms_per_call(fn, REPS, WARMUP)))
    thread.start()
    thread.join()
    return result["ms"]


def main() -> None:
    q, k, v, g = inputs(1024)
    o, lse = triton_forward(q, k, v, True, SCALE)
    cases = {
        "raw fwd": lambda: triton_forward(q, k, v, True, SCALE),
        "raw bwd": lambda: triton_backward(g, q, k, v, o, lse, True, SCALE),
        "api fwd no_grad": lambda: flash_attention(q.detach(), k.detach(), v.detach(), causal=True),
        "api fwd (graph)": lambda: flash_attention(q, k, v, causal=True),
        "api fwd+grad": lambda: torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), g),
    }
    for name, fn in cases.items():
        host, synced = host_ms_per_call(fn, REPS, WARMUP)
        print(f"{name:18} host {host:.3f} ms/call  (host, incl sync) {synced:.3f}", flush=True)
    print(f"raw bwd in a thread host {in_thread(cases['raw bwd'])[0]:.3f}", flush=True)
    torch.autograd.set_multithreading_enabled(False)
    host, _ = host_ms_per_call(cases["api fwd+grad"], REPS, WARMUP)
    print(f"api fwd+grad, autograd single-threaded host {host:.3f}", flush=True)
    torch.autograd.set_multithreading_enabled(True)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(REPS):
        cases["raw bwd"]()
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
