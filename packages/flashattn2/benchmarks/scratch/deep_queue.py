"""Scratch (v113 (b)): the forward and backward plans' host time per call behind a GPU made to sleep 0.6 ms per
call (a deep queue of work), with TMA descriptors expanded once per pointer ("new") or on every launch ("old").

    for i in 1 2; do for m in new old; do python deep_queue.py $m; done; done"""

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import matrix  # noqa: E402
import torch  # noqa: E402

from flashattn2 import _launch  # noqa: E402
from flashattn2._triton_backward import triton_backward  # noqa: E402
from flashattn2._triton_forward import triton_forward  # noqa: E402

if sys.argv[1] == "old":
    shipped = _launch.direct_launch

    def without_expansion(kernel):
        launch, between, expand = shipped(kernel)
        return (launch, between, None) if expand is None else (kernel.run.launch, between, None)

    _launch.direct_launch = without_expansion


def host_ms(fn, calls=300, sleep=True):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        if sleep:
            torch.cuda._sleep(1_000_000)
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return 1e3 * (t1 - t0) / calls


for shape in [(1, 16, 16, 2048, 128, True), (4, 16, 16, 1024, 128, False)]:
    q, k, v, g = (x.detach() for x in matrix.inputs(shape))
    causal, scale = shape[-1], shape[4] ** -0.5
    out, lse = triton_forward(q, k, v, causal, scale)
    triton_backward(g, q, k, v, out, lse, causal, scale)
    sleep_alone = [host_ms(lambda: None) for _ in range(3)]
    result = {"expansion": sys.argv[1], "shape": shape, "sleep alone": round(statistics.median(sleep_alone), 4)}
    for name, fn in (("forward", lambda: triton_forward(q, k, v, causal, scale)),
                     ("backward", lambda: triton_backward(g, q, k, v, out, lse, causal, scale))):
        deep = [host_ms(fn) for _ in range(3)]
        shallow = [host_ms(fn, calls=20, sleep=False) for _ in range(5)]
        result[name] = {"behind a deep queue": round(statistics.median(deep), 4),
                        "shallow": round(statistics.median(shallow), 4)}
    print(json.dumps(result), flush=True)
