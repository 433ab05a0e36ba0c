"""Session 27 host-time probe: where an eager forward+backward's host time goes, per layer, against SDPA.

Each case: microseconds per call (many calls enqueued, one synchronization), the minimum and median of ROUNDS
rounds, the cases interleaved round by round. Shapes: the tiny (1, 4, 128, 64) causal (one-launch backward) and
(1, 4, 2048, 64) causal (the dQ and dK/dV pair, as at (8, 16, 1024, 64)). Then cProfile of the second's
forward+backward, by own time."""

import cProfile
import pstats
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from flashattn2 import _triton_backward as tb
from flashattn2 import _triton_forward as tf
from flashattn2 import flash_attention
from flashattn2._inputs import check_attention_inputs
from flashattn2.api import resolve_backend
from flashattn2.autograd import scaled_attention

ROUNDS, REPS = 15, 200


def us(fn, reps=REPS):
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / reps * 1e6


def probe(shape):
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn_like(q)
    scale = shape[-1] ** -0.5
    o, lse = tf.triton_forward(q, k, v, True, scale)
    qd, kd, vd = q.detach(), k.detach(), v.detach()
    fplan = tf.plan_for(q, k, v, True, scale)
    bplan = tb.plan_for(g, q, k, v, o, True, scale)
    out_keep = flash_attention(q, k, v, causal=True)
    sd_keep = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    launch = fplan.launch or None
    cases = {
        "ours fwd+bwd": lambda: torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), g),
        "sdpa fwd+bwd": lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), g),
        "ours fwd (grad)": lambda: flash_attention(q, k, v, causal=True),
        "sdpa fwd (grad)": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        "ours fwd no grad": lambda: flash_attention(qd, kd, vd, causal=True),
        "sdpa fwd no grad": lambda: F.scaled_dot_product_attention(qd, kd, vd, is_causal=True),
        "ours bwd (retain)": lambda: torch.autograd.grad(out_keep, (q, k, v), g, retain_graph=True),
        "sdpa bwd (retain)": lambda: torch.autograd.grad(sd_keep, (q, k, v), g, retain_graph=True),
        "x*2 fwd+bwd": lambda: torch.autograd.grad(q * 2, q, g),
        "scaled_attention": lambda: scaled_attention(q, k, v, True, scale, "triton"),
        "triton_forward": lambda: tf.triton_forward(q, k, v, True, scale),
        "fwd plan call": lambda: fplan(q, k, v),
        "fwd plan lookup": lambda: tf.plan_for(q, k, v, True, scale),
        "triton_backward": lambda: tb.triton_backward(g, q, k, v, o, lse, True, scale),
        "bwd plan call": lambda: bplan(g, q, k, v, o, lse, True),
        "bwd plan lookup": lambda: tb.plan_for(g, q, k, v, o, True, scale),
        "check inputs": lambda: check_attention_inputs(q, k, v),
        "resolve backend": lambda: resolve_backend("auto", q.device),
        "empty o": lambda: torch.empty(fplan.out_shape, dtype=fplan.dtype, device=fplan.device),
        "empty 3 unbind": lambda: torch.empty((3, *shape), dtype=q.dtype, device=q.device).unbind(0),
        "empty x3": lambda: [torch.empty(shape, dtype=q.dtype, device=q.device) for _ in range(3)],
    }
    if launch is not None:
        cases["fwd launch only"] = lambda: launch(q, k, v, o, lse)
    bl = bplan.launch_one or bplan.launch_dq
    if bplan.launch_one is not None:
        cases["bwd launch only"] = lambda: bplan.launch_one(q, k, v, o, g, lse, *torch.empty((3, *shape), dtype=q.dtype, device=q.device).unbind(0))
    samples = {name: [] for name in cases}
    for fn in cases.values():
        us(fn, 20)
    for r in range(ROUNDS):
        names = list(cases) if r % 2 == 0 else list(reversed(cases))
        for name in names:
            samples[name].append(us(cases[name]))
    print(f"shape {shape}: bwd {'one launch' if bplan.launch_one is not None else 'dq + dkdv'}, fwd {'hopper' if fplan.hopper else 'triton'}")
    for name, s in samples.items():
        print(f"  {name:22s} min {min(s):7.1f}  median {statistics.median(s):7.1f} us")
    return cases


def main():
    torch.manual_seed(0)
    probe((1, 4, 128, 64))
    cases = probe((1, 4, 2048, 64))
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(REPS):
        cases["ours fwd+bwd"]()
    torch.cuda.synchronize()
    profiler.disable()
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(40)


if __name__ == "__main__":
    main()
