"""scratch (v163): the head-dim-64 Hopper backward with a dQ warpgroup (gb_dqwg: the default partition computes
each step's dQ = dS K; both consumer warpgroups one 8-warp partition) against the package: backward alone,
CUDA-graph replays, five alternating rounds; gradients checked bitwise equal to the package's and repeatable.
python ab_dqwg.py            measure (VARIANTS: module names, default gb_dqwg)"""
import faulthandler
import importlib
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from matrix import time_ms  # noqa: E402

import flashattn2._triton_forward as forward  # noqa: E402

SHAPES = [((1, 16, 16384, 64), True), ((4, 16, 4096, 64), True), ((4, 16, 4096, 64), False),
          ((8, 16, 2048, 64), True), ((2, 16, 8192, 64), True), ((1, 16, 16384, 64), False),
          ((3, 4, 4000, 64), True), ((2, 4, 3000, 64), False)]
SHAPES = SHAPES[: int(os.environ.get("NSHAPES", len(SHAPES)))]
TIMED = int(os.environ.get("TIMED", "6"))  # the first TIMED shapes are timed, the rest only checked


def setup(shape, causal, names):
    torch.manual_seed(0)
    q, k, v, g = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = shape[3] ** -0.5
    out, lse = forward.triton_forward(q, k, v, causal, scale)
    runs, grads = {}, {}
    for name in names:
        module = importlib.import_module(name)
        print(time.strftime("%X"), "compile", name, shape, causal, flush=True)
        plan = module.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, scale)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(k)

        def run(plan=plan, dq=dq, dk=dk, dv=dv):
            plan(g, q, k, v, out, lse, dq, dk, dv)
            return dq, dk, dv

        grads[name] = [x.clone() for x in run()]
        again = run()
        runs[name] = run
        print(" repeatable", [torch.equal(a, b) for a, b in zip(grads[name], again)], flush=True)
    return runs, grads


def measure(shape, causal, timed, rounds=5):
    names = ["flashattn2._gluon_backward"] + os.environ.get("VARIANTS", "gb_dqwg").split()
    runs, grads = setup(shape, causal, names)
    base = names[0]
    equal = {w: [torch.equal(a, b) for a, b in zip(grads[base], grads[w])] for w in names[1:]}
    diff = {w: [float((a.float() - b.float()).abs().max()) for a, b in zip(grads[base], grads[w])] for w in names[1:]}
    row = {"shape": shape, "causal": causal, "bitwise_equal": equal, "max_abs_diff": diff}
    if timed:
        samples = {w: [] for w in names}
        for r in range(rounds):
            for w in names if r % 2 == 0 else names[::-1]:
                samples[w].append(time_ms(runs[w], True))
        row["median_ms"] = {w: statistics.median(s) for w, s in samples.items()}
        row["to_package"] = {w: statistics.median(a / b for a, b in zip(samples[w], samples[base])) for w in names[1:]}
        row["samples"] = samples
    print({k: v for k, v in row.items() if k != "samples"}, flush=True)
    return row


if __name__ == "__main__":
    faulthandler.dump_traceback_later(int(os.environ.get("HANG_S", "500")), exit=True)
    rows = []
    for i, (s, c) in enumerate(SHAPES):
        rows.append(measure(s, c, i < TIMED))
        json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "ab_dqwg.json"), "w"), indent=1, default=str)
