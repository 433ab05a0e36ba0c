"""scratch (v148): the head-dim-64 Hopper forward with the intra-warpgroup overlap (gf_ov2.py: the next tile's S
issued before this tile's softmax, two ring slots; gf_ov3.py: three) against the package: forward alone, CUDA-graph
replays, five alternating rounds; outputs compared with the package's."""
import faulthandler
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

import gf_ov2  # noqa: E402
import gf_ov3  # noqa: E402

import flashattn2._gluon_forward as gf  # noqa: E402

SHAPES = [((1, 16, 16384, 64), True), ((1, 16, 16384, 64), False), ((4, 16, 4096, 64), True),
          ((8, 16, 2048, 64), True), ((2, 16, 8192, 64), True), ((3, 5, 1000, 64), True)]


def measure(shape, causal, rounds=5):
    torch.manual_seed(0)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    scale = shape[3] ** -0.5
    runs, outs = {}, {}
    for name, module in (("package", gf), ("ov2", gf_ov2), ("ov3", gf_ov3)):
        print(time.strftime("%X"), "compile", name, shape, causal, flush=True)
        plan = module.HopperForward(q.shape, k.shape, q.dtype, q.device, causal, scale)
        o = torch.empty_like(q)
        lse = torch.empty(shape[:3], device="cuda", dtype=torch.float32)

        def run(plan=plan, o=o, lse=lse):
            plan(q, k, v, o, lse)
            return o, lse

        outs[name] = [x.clone() for x in run()]
        runs[name] = run
    equal = {w: [(a.float() - b.float()).abs().max().item() for a, b in zip(outs["package"], outs[w])] for w in ("ov2", "ov3")}
    samples = {w: [] for w in runs}
    for r in range(rounds):
        for w in list(runs) if r % 2 == 0 else list(runs)[::-1]:
            samples[w].append(time_ms(runs[w], True))
    row = {"shape": shape, "causal": causal, "max_abs_diff_out_lse": equal,
           "median_ms": {w: statistics.median(s) for w, s in samples.items()},
           "to_package": {w: statistics.median(a / b for a, b in zip(samples[w], samples["package"])) for w in ("ov2", "ov3")},
           "samples": samples}
    print({k: v for k, v in row.items() if k != "samples"}, flush=True)
    return row


if __name__ == "__main__":
    faulthandler.dump_traceback_later(400, exit=True)
    rows = []
    for s, c in SHAPES:
        rows.append(measure(s, c))
        json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "ab_fwd_ov.json"), "w"), indent=1)
