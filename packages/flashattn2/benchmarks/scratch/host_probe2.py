"""Scratch: inclusive host time per call of each layer of flash_attention's eager fwd+bwd, (1, 4, 128, 64)."""
import collections
import functools
import json
import os
import time

import torch

import flashattn2._launch as la
import flashattn2._ops as ops
import flashattn2._triton_backward as tb
import flashattn2._triton_forward as tf
import flashattn2.api as api
import flashattn2.autograd as ag

acc = collections.defaultdict(int)
cnt = collections.defaultdict(int)


def timed(name, fn):
    @functools.wraps(fn)
    def wrapper(*a, **kw):
        t = time.perf_counter_ns()
        try:
            return fn(*a, **kw)
        finally:
            acc[name] += time.perf_counter_ns() - t
            cnt[name] += 1
    return wrapper


for mod, names in ((api, ["check_attention_inputs", "resolve_backend"]), (ag, ["attention_forward", "attention_backward", "_refuse_differentiation"]),
                   (ops, ["forward_any_layout", "backward_any_layout"]), (tf, ["forward_plan"]), (tb, ["backward_plan"]),
                   (tf, ["on_its_device"]), (tb, ["on_its_device"])):
    for n in names:
        setattr(mod, n, timed(f"{mod.__name__.split('.')[-1]}.{n}", getattr(mod, n)))
ops.IMPLEMENTATIONS["triton"] = (timed("triton_forward", tf.triton_forward), timed("triton_backward", tb.triton_backward))
tf.ForwardPlan.__call__ = timed("ForwardPlan.__call__", tf.ForwardPlan.__call__)
tb.BackwardPlan.__call__ = timed("BackwardPlan.__call__", tb.BackwardPlan.__call__)
la.CompiledLaunch.__call__ = timed("CompiledLaunch.__call__", la.CompiledLaunch.__call__)
fwd, bwd = ag.ScaledAttention.forward, ag.ScaledAttention.backward
ag.ScaledAttention.forward = staticmethod(timed("ScaledAttention.forward", fwd))
ag.ScaledAttention.backward = staticmethod(timed("ScaledAttention.backward", bwd))
flash = timed("flash_attention", api.flash_attention)
grad = timed("autograd.grad", torch.autograd.grad)

q, k, v = (torch.randn(1, 4, 128, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
g = torch.randn_like(q)
step = lambda: grad(flash(q, k, v, causal=True), (q, k, v), g)
res = {}
for threads in (True, False):
    torch.autograd.set_multithreading_enabled(threads)
    for _ in range(50):
        step()
    torch.cuda.synchronize()
    acc.clear(); cnt.clear()
    reps = 2000
    t = time.perf_counter()
    for _ in range(reps):
        step()
    torch.cuda.synchronize()
    total = (time.perf_counter() - t) / reps * 1e6
    rows = {n: (acc[n] / reps / 1e3, cnt[n] / reps) for n in acc}
    res[f"threads={threads}"] = {"us_per_step": total, "inclusive_us": rows}
    print(f"autograd threads {threads}: {total:.1f} us per fwd+bwd (instrumented)")
    for n, (us, c) in sorted(rows.items(), key=lambda t: -t[1][0]):
        print(f"   {n:40} {us:8.2f} us  x{c:.0f}")
json.dump(res, open(os.path.join(os.environ.get("OUT", "."), "host_probe2.json"), "w"), indent=1)
