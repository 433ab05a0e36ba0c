"""scratch (v168): the Triton backward's dQ and dK/dV tiles at short sequences (where the Hopper backward does not
run), backward alone, CUDA-graph replays, alternating rounds in one process: the table's pair against the dQ tile
(64, 32, 4, 3), the dK/dV tile (32, 64, 4, 3), and both. Gradients compared with the table pair's (max abs diff).
Writes $OUT/short-tiles-<triton>.json."""

import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from matrix import time_ms

from flashattn2._configs import Tile
from flashattn2._triton_backward import backward_plan, dkdv_tiles, dq_tiles, triton_backward
from flashattn2._triton_forward import triton_forward

os.environ["FLASHATTN2_HOPPER_BACKWARD"] = "0"
WAYS = {
    "table": (None, None),
    "dq64x32": (Tile(64, 32, 4, 3), None),
    "dkdv32x64": (None, Tile(32, 64, 4, 3)),
    "both": (Tile(64, 32, 4, 3), Tile(32, 64, 4, 3)),
}
SHAPES = [
    ((8, 16, 1024, 64), True),
    ((4, 16, 1024, 64), True),
    ((2, 16, 1024, 64), True),
    ((16, 16, 512, 64), True),
    ((32, 16, 512, 64), True),
    ((64, 16, 256, 64), True),
    ((4, 16, 2048, 64), True),
    ((2, 16, 1024, 64), False),
    ((4, 16, 512, 64), False),
]


def set_way(name):
    dq_tiles.pinned, dkdv_tiles.pinned = WAYS[name]
    backward_plan.cache_clear()


def bench(shape, causal, rounds=5, dtype=torch.bfloat16):
    q, k, v, g = (torch.randn(shape, device="cuda", dtype=dtype) for _ in range(4))
    scale = shape[-1] ** -0.5
    out, lse = triton_forward(q, k, v, causal, scale)
    run = lambda: triton_backward(g, q, k, v, out, lse, causal, scale)  # noqa: E731
    grads = {}
    for w in WAYS:
        set_way(w)
        grads[w] = [t.clone() for t in run()]
    diff = {w: max((a.float() - b.float()).abs().max().item() for a, b in zip(grads[w], grads["table"])) for w in WAYS}
    samples = {w: [] for w in WAYS}
    for r in range(rounds):
        for w in list(WAYS) if r % 2 == 0 else list(WAYS)[::-1]:
            set_way(w)
            samples[w].append(time_ms(run, True))
    med = {w: statistics.median(s) for w, s in samples.items()}
    to_table = {w: statistics.median(a / b for a, b in zip(samples[w], samples["table"])) for w in WAYS}
    print("bench", shape, causal, {w: round(m, 4) for w, m in med.items()}, {w: round(x, 3) for w, x in to_table.items()},
          {w: f"{d:.1e}" for w, d in diff.items()}, flush=True)
    return {"shape": shape, "causal": causal, "ms": med, "to_table": to_table, "max_diff": diff, "samples": samples}


if __name__ == "__main__":
    rows = [bench(s, c) for s, c in SHAPES]
    set_way("table")
    with open(os.path.join(os.environ["OUT"], f"short-tiles-{triton.__version__}.json"), "w") as fh:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                   "rows": rows}, fh, indent=1)
