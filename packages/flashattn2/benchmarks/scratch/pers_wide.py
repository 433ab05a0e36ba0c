"""scratch (v119): the causal Hopper backward at head dims 128 and 256 as persistent programs with v117's
interleaved dealing, against one-item programs and the Triton kernels, by CUDA-graph replays; then (v120)
forward+backward at the two head-dim-128 shapes where v118's forward gain did not show."""
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from matrix import time_ms  # noqa: E402

import flashattn2._gluon_backward as gb  # noqa: E402
import flashattn2._gluon_forward as gf  # noqa: E402
import flashattn2._triton_backward as backward  # noqa: E402
import flashattn2._triton_forward as forward  # noqa: E402
from flashattn2 import flash_attention  # noqa: E402
from flashattn2._hopper import below_thresholds  # noqa: E402

# way -> (FLASHATTN2_HOPPER_BACKWARD, PERSISTENT_CAUSAL_HEAD_DIMS, INTERLEAVED_L2_SHARE)
WAYS = {
    "triton": ("0", (64,), 0.75),
    "one_item": ("1", (64,), 0.75),
    "pers_pairs": ("1", (64, 128, 256), 0.0),
    "pers_inter": ("1", (64, 128, 256), 100.0),
}


def set_way(w):
    os.environ["FLASHATTN2_HOPPER_BACKWARD"], gb.PERSISTENT_CAUSAL_HEAD_DIMS, gb.INTERLEAVED_L2_SHARE = WAYS[w]
    backward.backward_plan.cache_clear()


def measure(shape, ways, rounds=3):
    q, k, v, g = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = shape[-1] ** -0.5
    out, lse = forward.triton_forward(q, k, v, True, scale)
    run = lambda: backward.triton_backward(g, q, k, v, out, lse, True, scale)  # noqa: E731
    samples = {w: [] for w in ways}
    ref = None
    for r in range(rounds):
        for w in ways if r % 2 == 0 else ways[::-1]:
            set_way(w)
            grads = run()
            if w != "triton" and r == 0:
                if ref is None:
                    ref = [x.clone() for x in grads]
                else:
                    assert all(torch.equal(a, b) for a, b in zip(ref, grads)), (shape, w, "not bitwise equal")
            samples[w].append(time_ms(run, True))
    row = {"shape": shape, **{w: statistics.median(s) for w, s in samples.items()}, "samples": samples}
    row["ratios_to_triton"] = {
        w: statistics.median(a / b for a, b in zip(samples[w], samples["triton"])) for w in ways if w != "triton"
    }
    row["ratios_to_one_item"] = {
        w: statistics.median(a / b for a, b in zip(samples[w], samples["one_item"])) for w in ways if w != "one_item"
    }
    print(shape, " ".join(f"{w} {row[w]:.4f}" for w in ways), "to triton",
          {w: round(x, 3) for w, x in row["ratios_to_triton"].items()}, "to one_item",
          {w: round(x, 3) for w, x in row["ratios_to_one_item"].items()}, flush=True)
    return row


def fwd_bwd(shape, rounds=5):
    """forward order (groups of 4 / all pairs) x backward way (package / pers_inter): fwd, bwd, fwd+bwd replays."""
    q, k, v, g = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(4))
    combos = [(fo, bw) for fo in ("group4", "all") for bw in ("package", "pers_inter")]
    samples = {c: {"fwd": [], "fwd_bwd": []} for c in combos}
    for r in range(rounds):
        for fo, bw in combos if r % 2 == 0 else combos[::-1]:
            gf.ALL_PAIRS_L2_SHARE = 0.0 if fo == "group4" else 0.5
            forward.forward_plan.cache_clear()
            set_way("one_item" if bw == "package" else bw)  # package: its thresholds choose the kernels
            gb.THRESHOLDS = MEASURED if bw == "package" else {**MEASURED, (128, True): ((0, 0),)}

            def f():
                with torch.no_grad():
                    flash_attention(q, k, v, causal=True)

            def fb():
                torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), g)

            samples[(fo, bw)]["fwd"].append(time_ms(f, True))
            samples[(fo, bw)]["fwd_bwd"].append(time_ms(fb, True))
    rows = []
    for c in combos:
        row = {"shape": shape, "forward_order": c[0], "backward": c[1],
               **{m: statistics.median(s) for m, s in samples[c].items()}, "samples": samples[c]}
        print(shape, c, {m: round(row[m], 4) for m in ("fwd", "fwd_bwd")}, flush=True)
        rows.append(row)
    gf.ALL_PAIRS_L2_SHARE, gb.THRESHOLDS = 0.5, MEASURED
    return rows


if __name__ == "__main__":
    MEASURED = dict(gb.THRESHOLDS)
    out = {"backward": [], "fwd_bwd": []}
    ways = tuple(WAYS)
    with below_thresholds():
        for shape in [(1, 16, 1024, 128), (2, 16, 1024, 128), (4, 16, 1024, 128), (8, 16, 1024, 128),
                      (1, 32, 1024, 128), (1, 16, 2048, 128), (2, 16, 2048, 128), (4, 16, 2048, 128),
                      (1, 8, 2048, 128), (1, 8, 4096, 128), (1, 16, 1024, 256), (2, 16, 1024, 256),
                      (1, 8, 2048, 256), (1, 16, 2048, 256)]:
            out["backward"].append(measure(shape, ways))
    for shape in [(2, 16, 1024, 128), (1, 16, 2048, 128)]:
        out["fwd_bwd"] += fwd_bwd(shape)
    json.dump(out, open(os.path.join(os.environ["OUT"], "pers_wide.json"), "w"), indent=1, default=str)
