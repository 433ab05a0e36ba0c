"""Where the host time of one flash_attention forward+backward goes (B=1, H=16, N=1024, D=64, bf16, causal).

Usage (CUDA GPU, repository root)::

    PYTHONPATH=packages/flashattn2/src FLASHATTN2_AUTOTUNE=0 python packages/flashattn2/benchmarks/host_time.py

Host milliseconds per call of: the forward and backward launchers alone, the API
forward (with and without autograd), the API forward plus torch.autograd.grad; the
backward launcher run from a second Python thread (autograd runs CUDA backward
functions on its own device thread); the API with autograd multithreading off; and
a cProfile of the backward launcher (Triton launch internals).
"""

import time, threading, torch
from flashattn2 import flash_attention
from flashattn2._triton_forward import triton_forward
from flashattn2._triton_backward import triton_backward
n = 1024
q, k, v = (torch.randn(1, 16, n, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
g = torch.randn_like(q)
o, l = triton_forward(q, k, v, True, 0.125)
def host(fn, reps=200):
    for _ in range(10): fn()
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(reps): fn()
    h = (time.perf_counter() - t) / reps * 1e3
    torch.cuda.synchronize(); tot = (time.perf_counter() - t) / reps * 1e3
    return h, tot
def in_thread(fn):
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("r", host(fn))); th.start(); th.join(); return out["r"]
cases = {
  "raw fwd": lambda: triton_forward(q, k, v, True, 0.125),
  "raw bwd": lambda: triton_backward(g, q, k, v, o, l, True, 0.125),
  "api fwd no_grad": lambda: flash_attention(q.detach(), k.detach(), v.detach(), causal=True),
  "api fwd (graph)": lambda: flash_attention(q, k, v, causal=True),
  "api fwd+grad": lambda: torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), g),
}
for name, fn in cases.items():
    print(f"{name:18} host {host(fn)[0]:.3f} ms/call  (host, incl sync) {host(fn)[1]:.3f}", flush=True)
print(f"raw bwd in a thread host {in_thread(cases['raw bwd'])[0]:.3f}", flush=True)
torch.autograd.set_multithreading_enabled(False)
print(f"api fwd+grad, autograd single-threaded host {host(cases['api fwd+grad'])[0]:.3f}", flush=True)
torch.autograd.set_multithreading_enabled(True)
import cProfile, pstats
pr = cProfile.Profile(); pr.enable()
for _ in range(200): cases["raw bwd"]()
pr.disable(); pstats.Stats(pr).sort_stats("tottime").print_stats(15)
