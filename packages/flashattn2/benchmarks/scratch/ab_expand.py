"""Scratch (v113): TMA descriptors expanded once per pointer ("new", as shipped) or by Triton's wrapper on every
launch ("old"), eager forward+backward against cuDNN.

    for i in 1 2; do for m in new old; do python ab_expand.py $m; done; done

One JSON line per shape: three alternating rounds (ours, cuDNN) and the median of the rounds' ratios."""

import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import matrix  # noqa: E402

from flashattn2 import _launch  # noqa: E402

if sys.argv[1] == "old":
    shipped = _launch.direct_launch

    def without_expansion(kernel):
        launch, between, expand = shipped(kernel)
        if expand is None:
            return launch, between, None
        return kernel.run.launch, between, None

    _launch.direct_launch = without_expansion
SHAPES = [
    (2, 16, 16, 1024, 128, True),
    (1, 16, 16, 2048, 128, True),
    (4, 16, 16, 2048, 64, True),
    (4, 16, 16, 1024, 128, False),
    (2, 16, 16, 2048, 64, False),
    (8, 16, 16, 1024, 64, True),
]
impls = matrix.implementations()
for shape in SHAPES:
    q, k, v, g = matrix.inputs(shape)
    calls = {name: matrix.passes(*impls[name], q, k, v, g, shape[-1]) for name in ("flashattn2", "cudnn")}
    for name in calls:
        calls[name]["fwd_bwd_ms"]()
    t = {name: [] for name in calls}
    for r in range(3):
        for name in list(calls) if r % 2 == 0 else list(calls)[::-1]:
            t[name].append(round(matrix.time_ms(calls[name]["fwd_bwd_ms"]), 4))
    ratio = statistics.median(c / o for c, o in zip(t["cudnn"], t["flashattn2"]))
    print(json.dumps({"expansion": sys.argv[1], "shape": shape, "ours": t["flashattn2"], "cudnn": t["cudnn"],
                      "cudnn/ours": round(ratio, 3)}), flush=True)
