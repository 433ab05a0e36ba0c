"""Scratch (v113): host ms per eager forward+backward call (100 calls enqueued, no synchronization inside; median
and min of 7 rounds) with TMA descriptors expanded once per pointer ("new") or on every launch ("old"), and
cuDNN's alongside.

    for i in 1 2; do for m in new old; do python ab_host.py $m; done; done"""

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import matrix  # noqa: E402
import torch  # noqa: E402

from flashattn2 import _launch  # noqa: E402

if sys.argv[1] == "old":
    shipped = _launch.direct_launch

    def without_expansion(kernel):
        launch, between, expand = shipped(kernel)
        return (launch, between, None) if expand is None else (kernel.run.launch, between, None)

    _launch.direct_launch = without_expansion
impls = matrix.implementations()
for shape in [(1, 16, 16, 2048, 128, True), (2, 16, 16, 2048, 64, False), (4, 16, 16, 1024, 128, False)]:
    q, k, v, g = matrix.inputs(shape)
    result = {"expansion": sys.argv[1], "shape": shape}
    for name in ("flashattn2", "cudnn"):
        call = matrix.passes(*impls[name], q, k, v, g, shape[-1])["fwd_bwd_ms"]
        for _ in range(30):
            call()
        rounds = []
        for _ in range(7):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(100):
                call()
            rounds.append(round((time.perf_counter() - t0) * 10, 4))  # ms per call
        torch.cuda.synchronize()
        result[name] = {"median": statistics.median(rounds), "min": min(rounds)}
    print(json.dumps(result), flush=True)
