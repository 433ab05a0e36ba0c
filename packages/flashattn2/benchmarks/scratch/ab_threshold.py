"""scratch (v151): the head-dim-64 causal forward with three consumers against two between 4096 and 8192 keys
(THREE_CONSUMER_THRESHOLDS forced each way): CUDA-graph replays, alternating rounds."""
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from matrix import time_ms  # noqa: E402

from flashattn2 import _gluon_forward as gf  # noqa: E402


def way(three, q, k, v, causal):
    gf.THREE_CONSUMER_THRESHOLDS = {c: ((0, 0),) if three else ((1 << 40, 0),) for c in (True, False)}
    fwd = gf.HopperForward(q.shape, k.shape, q.dtype, q.device, causal, q.shape[-1] ** -0.5)
    assert fwd.three_consumers == three
    out, lse = torch.empty_like(q), torch.empty(q.shape[:3], device=q.device, dtype=torch.float32)
    return lambda: fwd(q, k, v, out, lse)


rows = []
for shape, causal in [((2, 16, 6144, 64), True), ((1, 16, 6144, 64), True), ((4, 16, 6144, 64), True),
                      ((2, 16, 5120, 64), True), ((1, 32, 8192, 64), True), ((4, 16, 8192, 64), True),
                      ((16, 16, 1536, 64), False), ((32, 16, 1024, 64), False)]:
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ways = {"two": way(False, q, k, v, causal), "three": way(True, q, k, v, causal)}
    samples = {w: [] for w in ways}
    for r in range(5):
        for w in list(ways) if r % 2 == 0 else list(ways)[::-1]:
            samples[w].append(time_ms(ways[w], True))
    ratio = statistics.median(a / b for a, b in zip(samples["three"], samples["two"]))
    row = {"shape": shape, "causal": causal, "ms": {w: statistics.median(s) for w, s in samples.items()},
           "three_to_two": ratio, "samples": samples}
    print(shape, causal, {w: round(m, 4) for w, m in row["ms"].items()}, round(ratio, 3), flush=True)
    rows.append(row)
json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(os.path.join(os.environ["OUT"], "v151.json"), "w"), indent=1)
