"""scratch (v130): host time per eager call while the GPU is busy (a sleep kernel ahead of the calls), so the
host's enqueue time is measured alone, at (8, 16, 1024, 64) causal and (1, 4, 128, 64): flashattn2, cuDNN and
FLASH forward+backward, the forward alone, and flashattn2's layers; then a cProfile of flashattn2's
forward+backward at (8, 16, 1024, 64)."""
import cProfile
import json
import os
import pstats
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashattn2 import flash_attention
from flashattn2._triton_backward import triton_backward
from flashattn2._triton_forward import triton_forward

N_CALLS = 40


def enqueue_us(fn, sleep_cycles=int(8e7)):
    torch.cuda.synchronize()
    torch.cuda._sleep(sleep_cycles)
    t0 = time.perf_counter()
    for _ in range(N_CALLS):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / N_CALLS * 1e6


def cases(shape):
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn_like(q)
    scale = shape[-1] ** -0.5
    o, lse = triton_forward(q, k, v, True, scale)

    def sdpa(backend):
        def f():
            with sdpa_kernel(backend):
                return torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), g)

        return f

    def sdpa_fwd(backend):
        def f():
            with torch.no_grad(), sdpa_kernel(backend):
                F.scaled_dot_product_attention(q, k, v, is_causal=True)

        return f

    def ours_fwd():
        with torch.no_grad():
            flash_attention(q, k, v, causal=True)

    return {
        "ours fwd+bwd": lambda: torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), g),
        "cudnn fwd+bwd": sdpa(SDPBackend.CUDNN_ATTENTION),
        "flash fwd+bwd": sdpa(SDPBackend.FLASH_ATTENTION),
        "ours fwd": ours_fwd,
        "cudnn fwd": sdpa_fwd(SDPBackend.CUDNN_ATTENTION),
        "ours launcher fwd": lambda: triton_forward(q, k, v, True, scale),
        "ours launcher bwd": lambda: triton_backward(g, q, k, v, o, lse, True, scale),
        "x*2 fwd+bwd": lambda: torch.autograd.grad(q * 2, q, g),
    }


def main():
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": []}
    for shape in [(8, 16, 1024, 64), (1, 4, 128, 64)]:
        cs = cases(shape)
        for f in cs.values():
            for _ in range(5):
                f()
        samples = {name: [] for name in cs}
        for r in range(15):
            for name in list(cs) if r % 2 == 0 else list(cs)[::-1]:
                samples[name].append(enqueue_us(cs[name]))
        row = {"shape": shape, "median_us": {n: statistics.median(s) for n, s in samples.items()},
               "min_us": {n: min(s) for n, s in samples.items()}, "samples": samples}
        out["rows"].append(row)
        print(shape, flush=True)
        for n in cs:
            print(f"  {n:22} median {row['median_us'][n]:7.1f}  min {row['min_us'][n]:7.1f} us", flush=True)
    cs = cases((8, 16, 1024, 64))
    prof = cProfile.Profile()
    torch.cuda._sleep(int(3e8))
    prof.enable()
    for _ in range(100):
        cs["ours fwd+bwd"]()
    prof.disable()
    torch.cuda.synchronize()
    with open(os.path.join(os.environ["OUT"], "profile.txt"), "w") as fh:
        pstats.Stats(prof, stream=fh).sort_stats("tottime").print_stats(45)
    with open(os.path.join(os.environ["OUT"], "host_busy.json"), "w") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
