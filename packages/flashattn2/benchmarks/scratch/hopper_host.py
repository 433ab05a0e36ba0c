"""Session 27: host time of the Hopper kernels' launch path against the Triton kernels', at a shape whose GPU work
is a few microseconds (the thresholds lifted), on the main thread; then cProfile of the Hopper backward's calls."""

import cProfile
import os
import pstats
import statistics
import sys
import time

import torch

from flashattn2 import _hopper
from flashattn2 import _triton_backward as tb
from flashattn2 import _triton_forward as tf


def us(fn, reps=300):
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / reps * 1e6


def cases_for(shape, causal):
    q, k, v, g = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = shape[-1] ** -0.5
    out = {}
    for name, off in (("hopper", "1"), ("triton", "0")):
        os.environ["FLASHATTN2_HOPPER_FORWARD"] = os.environ["FLASHATTN2_HOPPER_BACKWARD"] = off
        tf.forward_plan.cache_clear()
        tb.backward_plan.cache_clear()
        with _hopper.below_thresholds():
            fplan = tf.plan_for(q, k, v, causal, scale)
            o, lse = fplan(q, k, v)
            bplan = tb.plan_for(g, q, k, v, o, causal, scale)
            bplan(g, q, k, v, o, lse)
        assert (fplan.hopper is not None) == (off == "1") and (bplan.hopper is not None) == (off == "1"), name
        out[f"{name} fwd plan"] = lambda fplan=fplan: fplan(q, k, v)
        out[f"{name} bwd plan"] = lambda bplan=bplan, o=o, lse=lse: bplan(g, q, k, v, o, lse)
        if off == "1":
            hb = bplan.hopper
            dq, dk, dv = torch.empty((3, *shape), dtype=q.dtype, device=q.device).unbind(0)
            out["hopper bwd kernel call"] = lambda hb=hb, o=o, lse=lse: hb(g, q, k, v, o, lse, dq, dk, dv)
            d = hb.describe_q
            out["TmaDescriptor call"] = lambda d=d: d(q)
            desc = d(q)
            from triton.backends.nvidia.driver import make_tensordesc_arg

            metas = getattr(hb.kernel.kernel.metadata, "tensordesc_meta", None)
            meta = metas[0] if metas else None
            out["make_tensordesc_arg"] = lambda desc=desc, meta=meta: make_tensordesc_arg(desc, meta)
            out["prologue launch"] = lambda hb=hb, o=o: hb.prologue(o, g, hb.new_delta(), hb.new_counters())
            out["3 workspace allocs"] = lambda hb=hb: (hb.new_delta(), hb.new_dq_acc(), hb.new_counters())
    os.environ["FLASHATTN2_HOPPER_FORWARD"] = os.environ["FLASHATTN2_HOPPER_BACKWARD"] = "1"
    return out


def main():
    for shape, causal in (((1, 2, 512, 128), True), ((1, 2, 512, 128), False)):
        cases = cases_for(shape, causal)
        samples = {n: [] for n in cases}
        for r in range(9):
            for n in list(cases) if r % 2 == 0 else list(reversed(cases)):
                samples[n].append(us(cases[n]))
        print(f"{shape} causal={causal}", flush=True)
        for n, s in samples.items():
            print(f"  {n:26s} min {min(s):7.1f}  median {statistics.median(s):7.1f} us", flush=True)
    prof = cProfile.Profile()
    fn = cases["hopper bwd plan"]
    prof.enable()
    for _ in range(300):
        fn()
    torch.cuda.synchronize()
    prof.disable()
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
