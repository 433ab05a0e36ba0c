"""scratch (v124): the causal backward at 1024-1536 keys, the Hopper kernel's one-item programs against the Triton
kernels, near 2**28 scores (the head-dim-128 rule starts at 2**29 there), by CUDA-graph replays of the backward
alone; cuDNN's backward as its forward+backward minus its forward."""
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from matrix import time_ms  # noqa: E402

import flashattn2._gluon_backward as gb  # noqa: E402
import flashattn2._triton_backward as backward  # noqa: E402
import flashattn2._triton_forward as forward  # noqa: E402


def measure(shape, hkv, rounds=5):
    b, h, n, d = shape
    q = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hkv, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    g = torch.randn_like(q)
    scale = d**-0.5
    out, lse = forward.triton_forward(q, k, v, True, scale)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(k)
    plan = gb.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, True, scale)
    persistent = plan.grid[0] != plan.items
    os.environ["FLASHATTN2_HOPPER_BACKWARD"] = "0"
    backward.backward_plan.cache_clear()
    backward.triton_backward(g, q, k, v, out, lse, True, scale)
    os.environ["FLASHATTN2_HOPPER_BACKWARD"] = "1"
    qq, kk, vv = (x.detach().clone().requires_grad_(True) for x in (q, k, v))

    def sdpa():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(qq, kk, vv, is_causal=True, enable_gqa=hkv != h)

    def cudnn_fwd():
        with torch.no_grad():
            sdpa()

    runs = {
        "triton": lambda: backward.triton_backward(g, q, k, v, out, lse, True, scale),
        "hopper": lambda: plan(g, q, k, v, out, lse, dq, dk, dv),
        "cudnn_fwd_bwd": lambda: torch.autograd.grad(sdpa(), (qq, kk, vv), g),
        "cudnn_fwd": cudnn_fwd,
    }
    samples = {w: [] for w in runs}
    names = list(runs)
    for r in range(rounds):
        for w in names if r % 2 == 0 else names[::-1]:
            samples[w].append(time_ms(runs[w], True))
    samples["cudnn"] = [a - b for a, b in zip(samples.pop("cudnn_fwd_bwd"), samples.pop("cudnn_fwd"))]
    row = {"shape": shape, "hkv": hkv, "persistent": persistent, "scores_log2": round(float(torch.tensor(b * h * n * n).log2()), 2)}
    row.update({w: statistics.median(s) for w, s in samples.items()})
    row["hopper_to_triton"] = statistics.median(a / b for a, b in zip(samples["hopper"], samples["triton"]))
    row["hopper_to_cudnn"] = statistics.median(a / b for a, b in zip(samples["hopper"], samples["cudnn"]))
    row["triton_to_cudnn"] = statistics.median(a / b for a, b in zip(samples["triton"], samples["cudnn"]))
    row["samples"] = samples
    print({k: (round(x, 4) if isinstance(x, float) else x) for k, x in row.items() if k != "samples"}, flush=True)
    return row


if __name__ == "__main__":
    shapes = [((16, 16, 1024, 128), 16), ((8, 32, 1024, 128), 32), ((8, 32, 1024, 128), 8), ((32, 8, 1024, 128), 8),
              ((4, 64, 1024, 128), 64), ((16, 16, 1280, 128), 16), ((12, 16, 1024, 128), 16),
              ((8, 16, 1536, 128), 16), ((32, 16, 1024, 128), 16), ((16, 16, 1024, 64), 16),
              ((32, 16, 1024, 64), 16)]
    rows = [measure(s, hkv) for s, hkv in shapes]
    json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "ab_thr.json"), "w"), indent=1, default=str)
