"""scratch (v126): what the dQ chain costs the causal Hopper backward at short sequences. Diagnostic copies of the
kernel (gb_diag.py with DIAG 1: the dQ adds without the wait for their turn; DIAG 2: no dQ adds; results wrong,
timings only) against the kernel itself (DIAG 0), backward alone, CUDA-graph replays, five alternating rounds."""
import importlib
import json
import os
import statistics
import sys

import torch

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from matrix import time_ms  # noqa: E402

import flashattn2._triton_forward as forward  # noqa: E402

source = open(os.path.join(HERE, "gb_diag.py")).read()
MODULES = {}
for diag in (0, 1, 2):
    name = f"gb_diag_{diag}"
    with open(os.path.join(HERE, name + ".py"), "w") as f:
        f.write(source.replace("DIAG = gl.constexpr(0)", f"DIAG = gl.constexpr({diag})"))
    MODULES[diag] = importlib.import_module(name)


def measure(shape, causal, rounds=5):
    b, h, n, d = shape
    q, k, v, g = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = d**-0.5
    out, lse = forward.triton_forward(q, k, v, causal, scale)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(k)
    runs = {}
    for diag, module in MODULES.items():
        plan = module.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, scale)
        runs[f"diag{diag}"] = (lambda plan=plan: plan(g, q, k, v, out, lse, dq, dk, dv))
        persistent = plan.grid[0] != plan.items
    if causal:  # no waits, and every causal item dealt longest first to persistent programs
        module = MODULES[1]
        module.LONGEST_FIRST, module.PERSISTENT_CAUSAL_HEAD_DIMS = True, (64, 128, 256)
        plan = module.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, scale)
        module.LONGEST_FIRST, module.PERSISTENT_CAUSAL_HEAD_DIMS = False, (64,)
        runs["diag1_lpt"] = lambda plan=plan: plan(g, q, k, v, out, lse, dq, dk, dv)
    names = list(runs)
    samples = {w: [] for w in names}
    for r in range(rounds):
        for w in names if r % 2 == 0 else names[::-1]:
            samples[w].append(time_ms(runs[w], True))
    row = {"shape": shape, "causal": causal, "persistent": persistent}
    row.update({w: statistics.median(s) for w, s in samples.items()})
    row.update({f"{w}_to_diag0": statistics.median(a / b for a, b in zip(samples[w], samples["diag0"]))
                for w in names[1:]})
    row["samples"] = samples
    print({k: (round(x, 4) if isinstance(x, float) else x) for k, x in row.items() if k != "samples"}, flush=True)
    return row


if __name__ == "__main__":
    shapes = [((1, 16, 16384, 64), True), ((4, 16, 4096, 64), True), ((2, 16, 8192, 64), True),
              ((8, 16, 1024, 128), True), ((16, 16, 1024, 128), True), ((4, 16, 4096, 128), True),
              ((1, 16, 16384, 128), True), ((8, 16, 1024, 64), True)]
    if len(sys.argv) > 1 and sys.argv[1] == "smoke":
        shapes = shapes[:1]
    rows = [measure(s, c, rounds=1 if len(sys.argv) > 1 else 5) for s, c in shapes]
    json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "ab_diag_lpt.json"), "w"), indent=1, default=str)
