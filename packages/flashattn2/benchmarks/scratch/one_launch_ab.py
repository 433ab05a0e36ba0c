"""scratch (v131): the backward as one launch (dQ and dK/dV programs in one grid) against two, above today's bound
(ONE_LAUNCH_MAX_SCORES, 4.2M scores): host time per eager forward+backward with the GPU busy (a sleep kernel
ahead of the calls) and GPU time by CUDA-graph replays, alternating rounds; gradients compared."""
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from matrix import time_ms  # noqa: E402

import flashattn2._triton_backward as tb  # noqa: E402
from flashattn2 import flash_attention  # noqa: E402

BOUNDS = {"two": 4 * 1024 * 1024, "one": 2**40}
N_CALLS = 40


def use(way):
    tb.ONE_LAUNCH_MAX_SCORES = BOUNDS[way]
    tb.backward_plan.cache_clear()


def enqueue_us(fn):
    torch.cuda.synchronize()
    torch.cuda._sleep(int(8e7))
    t0 = time.perf_counter()
    for _ in range(N_CALLS):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / N_CALLS * 1e6


def run(shape, causal=True, rounds=9):
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn_like(q)

    def fb():
        return torch.autograd.grad(flash_attention(q, k, v, causal=causal), (q, k, v), g)

    grads = {}
    for way in BOUNDS:
        use(way)
        grads[way] = [t.clone() for t in fb()]
    diff = max((a.float() - b.float()).abs().max().item() for a, b in zip(grads["one"], grads["two"]))
    host = {w: [] for w in BOUNDS}
    gpu = {w: [] for w in BOUNDS}
    for r in range(rounds):
        for way in list(BOUNDS) if r % 2 == 0 else list(BOUNDS)[::-1]:
            use(way)
            fb()
            host[way].append(enqueue_us(fb))
            if r < 5:
                gpu[way].append(time_ms(fb, True))
    row = {
        "shape": shape, "causal": causal, "max_grad_diff": diff,
        "host_us": {w: statistics.median(s) for w, s in host.items()},
        "host_min_us": {w: min(s) for w, s in host.items()},
        "gpu_ms": {w: statistics.median(s) for w, s in gpu.items()},
        "gpu_one_to_two": statistics.median(a / b for a, b in zip(gpu["one"], gpu["two"])),
        "samples": {"host": host, "gpu": gpu},
    }
    print(shape, causal, "diff", diff, "host us", {w: round(x, 1) for w, x in row["host_us"].items()},
          "gpu ms", {w: round(x, 4) for w, x in row["gpu_ms"].items()}, "gpu one/two", round(row["gpu_one_to_two"], 3),
          flush=True)
    return row


if __name__ == "__main__":
    rows = [run(s) for s in [(8, 16, 1024, 64), (4, 16, 1024, 64), (2, 16, 1024, 64), (8, 16, 512, 64),
                             (8, 16, 1024, 128), (4, 16, 1024, 128)]]
    rows.append(run((4, 16, 1024, 64), causal=False))
    with open(os.path.join(os.environ["OUT"], "v131.json"), "w") as fh:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, fh, indent=1)
