"""Session 27: the Hopper backward against the Triton backward at 2048 keys with 2^26-2^28 scores (where THRESHOLDS
starts it), alone (triton_backward) and in eager forward+backward, do_bench medians of alternating rounds."""

import os
import statistics

import torch
import triton

from flashattn2 import _triton_backward as tb
from flashattn2 import _triton_forward as tf
from flashattn2 import flash_attention

for shape, causal in (((1, 16, 2048, 128), True), ((2, 16, 2048, 128), True), ((4, 16, 2048, 128), True),
                      ((1, 16, 2048, 64), True), ((4, 16, 1024, 128), False)):
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn_like(q)
    scale = shape[-1] ** -0.5
    o, lse = tf.triton_forward(q.detach(), k.detach(), v.detach(), causal, scale)
    fns = {}
    for name, flag in (("hopper", "1"), ("triton", "0")):
        os.environ["FLASHATTN2_HOPPER_BACKWARD"] = flag
        tb.backward_plan.cache_clear()
        tf.forward_plan.cache_clear()
        bplan = tb.plan_for(g, q, k, v, o, causal, scale)
        assert (bplan.hopper is not None) == (flag == "1")
        fns[f"bwd {name}"] = lambda bplan=bplan: bplan(g, q, k, v, o, lse)
        fplan = tf.plan_for(q, k, v, causal, scale)

        def fb(fplan=fplan, bplan=bplan):
            out, l2 = fplan(q, k, v)
            bplan(g, q, k, v, out, l2)

        fns[f"fwd+bwd {name}"] = fb
        fns[f"bwd {name}"]()
        fb()
    os.environ["FLASHATTN2_HOPPER_BACKWARD"] = "1"
    t = {n: [] for n in fns}
    for r in range(5):
        for n in list(fns) if r % 2 == 0 else list(reversed(fns)):
            t[n].append(triton.testing.do_bench(fns[n], warmup=25, rep=100, return_mode="median"))
    med = {n: statistics.median(x) for n, x in t.items()}
    print(shape, causal, " ".join(f"{n} {m:.3f}" for n, m in med.items()),
          f"bwd hopper/triton {statistics.median(a / b for a, b in zip(t['bwd hopper'], t['bwd triton'])):.2f}",
          f"fwd+bwd {statistics.median(a / b for a, b in zip(t['fwd+bwd hopper'], t['fwd+bwd triton'])):.2f}",
          flush=True)
