"""Scratch: where the eager fwd+bwd host time at (1, 4, 128, 64) goes (interleaved rounds; traces)."""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from flashattn2 import flash_attention
from flashattn2._launch import CompiledLaunch
from flashattn2._triton_backward import triton_backward
from flashattn2._triton_forward import triton_forward

OUT = os.environ.get("OUT", ".")
q, k, v = (torch.randn(1, 4, 128, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
g = torch.randn_like(q)
scale = 64 ** -0.5


class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def host_ms(fn, reps=200, warmup=20):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / reps * 1e3


def latency_ms(fn, reps=200, warmup=20):
    """Each call followed by a synchronization: host + GPU per call, not overlapped."""
    for _ in range(warmup):
        fn(); torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        fn(); torch.cuda.synchronize()
    return (time.perf_counter() - t) / reps * 1e3


o, lse = triton_forward(q, k, v, True, scale)
cases = {
    "ours": lambda: torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), g),
    "sdpa": lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), g),
    "twice": lambda: torch.autograd.grad(Twice.apply(q), q, g),
    "x2": lambda: torch.autograd.grad(q * 2, q, g),
    "ours_fwd_graph": lambda: flash_attention(q, k, v, causal=True),
    "sdpa_fwd_graph": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    "launchers": lambda: (triton_forward(q, k, v, True, scale), triton_backward(g, q, k, v, o, lse, True, scale)),
    "fwd_launcher": lambda: triton_forward(q, k, v, True, scale),
    "bwd_launcher": lambda: triton_backward(g, q, k, v, o, lse, True, scale),
    "empty4": lambda: [torch.empty(4, 128, 64, device="cuda") for _ in range(4)],
}
res = {}
for mode, timer in (("throughput", host_ms), ("latency", latency_ms)):
    samples = {n: [] for n in cases}
    for _ in range(5):
        for n, f in cases.items():
            samples[n].append(timer(f))
    res[mode] = {n: statistics.median(s) for n, s in samples.items()}
    print(mode, json.dumps({n: round(x, 4) for n, x in res[mode].items()}), flush=True)

# Launches skipped after compilation: the host work without the launches themselves.
orig = CompiledLaunch.__call__
CompiledLaunch.__call__ = lambda self, *t: None if self.kernel is not None else orig(self, *t)
res["nolaunch"] = {n: statistics.median([host_ms(cases[n]) for _ in range(5)]) for n in ("ours", "launchers")}
CompiledLaunch.__call__ = orig
print("nolaunch", res["nolaunch"], flush=True)

torch.autograd.set_multithreading_enabled(False)
res["single_thread"] = {n: statistics.median([host_ms(cases[n]) for _ in range(5)]) for n in ("ours", "sdpa", "twice", "x2")}
torch.autograd.set_multithreading_enabled(True)
print("single_thread", res["single_thread"], flush=True)

from torch.profiler import ProfilerActivity, profile

for name in ("ours", "sdpa"):
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(30):
            cases[name]()
        torch.cuda.synchronize()
    prof.export_chrome_trace(f"{OUT}/trace_{name}.json")
    print(name, prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25), flush=True)
json.dump(res, open(f"{OUT}/host_probe.json", "w"), indent=1)
