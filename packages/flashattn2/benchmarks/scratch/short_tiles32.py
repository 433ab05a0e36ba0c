"""scratch (v169): the short causal backward tiles (v168) against the table's pair where v168 did not time them:
head dim 32 (bucket 32, which takes the head-dim-64 table) in bf16, and fp16 at head dim 64. Backward alone,
CUDA-graph replays, five alternating rounds in one process; gradients compared bitwise. Writes $OUT/short32.json."""

import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from matrix import time_ms

from flashattn2._configs import _HOPPER_DEFAULTS, SHORT_CAUSAL_BACKWARD_TILES
from flashattn2._triton_backward import backward_plan, dkdv_tiles, dq_tiles, triton_backward
from flashattn2._triton_forward import triton_forward

os.environ["FLASHATTN2_HOPPER_BACKWARD"] = "0"
WAYS = {
    "table": (_HOPPER_DEFAULTS["dq"][(64, 2)], _HOPPER_DEFAULTS["dkdv"][(64, 2)]),
    "short": (SHORT_CAUSAL_BACKWARD_TILES["dq"], SHORT_CAUSAL_BACKWARD_TILES["dkdv"]),
}
SHAPES = [
    ((8, 16, 1024, 32), torch.bfloat16),
    ((4, 16, 1024, 32), torch.bfloat16),
    ((2, 16, 1024, 32), torch.bfloat16),
    ((16, 16, 512, 32), torch.bfloat16),
    ((64, 16, 256, 32), torch.bfloat16),
    ((8, 16, 1024, 64), torch.float16),
    ((16, 16, 512, 64), torch.float16),
    ((64, 16, 256, 64), torch.float16),
]


def set_way(name):
    dq_tiles.pinned, dkdv_tiles.pinned = WAYS[name]
    backward_plan.cache_clear()


def bench(shape, dtype, rounds=5):
    q, k, v, g = (torch.randn(shape, device="cuda", dtype=dtype) for _ in range(4))
    scale = shape[-1] ** -0.5
    out, lse = triton_forward(q, k, v, True, scale)
    run = lambda: triton_backward(g, q, k, v, out, lse, True, scale)  # noqa: E731
    grads = {}
    for w in WAYS:
        set_way(w)
        grads[w] = [t.clone() for t in run()]
    equal = all(torch.equal(a, b) for a, b in zip(grads["short"], grads["table"]))
    samples = {w: [] for w in WAYS}
    for r in range(rounds):
        for w in list(WAYS) if r % 2 == 0 else list(WAYS)[::-1]:
            set_way(w)
            samples[w].append(time_ms(run, True))
    med = {w: statistics.median(s) for w, s in samples.items()}
    ratio = statistics.median(a / b for a, b in zip(samples["short"], samples["table"]))
    print("bench", shape, str(dtype), {w: round(m, 4) for w, m in med.items()}, round(ratio, 3),
          "equal" if equal else "DIFFERENT", flush=True)
    return {"shape": shape, "dtype": str(dtype), "ms": med, "short_to_table": ratio, "bitwise_equal": equal,
            "samples": samples}


if __name__ == "__main__":
    rows = [bench(s, d) for s, d in SHAPES]
    with open(os.path.join(os.environ["OUT"], "short32.json"), "w") as fh:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                   "rows": rows}, fh, indent=1)
