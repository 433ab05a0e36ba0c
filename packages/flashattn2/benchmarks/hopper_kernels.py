"""Where the Hopper kernels should run: forward or backward time by shape, with them and with the Triton kernels.

Usage (Hopper GPU, Triton 3.6, repository root)::

    PYTHONPATH=packages/flashattn2/src python packages/flashattn2/benchmarks/hopper_kernels.py --kernel backward \
        --out hopper.json

For each (B, H, N, D) shape and mask (bf16), milliseconds of ``triton_forward`` or
``triton_backward`` (``triton.testing.do_bench`` median) with the Hopper kernel and
with the Triton kernels, in alternating rounds; the ratio is the median of the
rounds' ratios (< 1: the Hopper kernel is faster). Both kernels' ``THRESHOLDS``
(``_gluon_forward``, ``_gluon_backward``) are chosen from this table. ``--graph``
times replays of CUDA graphs instead (the GPU's time alone, without the host's
time per call); ``--shapes`` replaces the built-in list.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import torch
import triton
from matrix import time_ms, write_rows  # this folder is on sys.path when run as a script

import flashattn2._triton_backward as backward
import flashattn2._triton_forward as forward
from flashattn2._hopper import SWITCHES, below_thresholds

SHAPES = {
    "backward": [
        ((8, 16, 1024, 64), True),
        ((32, 16, 1024, 64), True),
        ((64, 16, 1024, 64), True),
        ((16, 16, 512, 64), True),
        ((128, 16, 512, 64), True),
        ((256, 16, 512, 64), True),
        ((1, 16, 2048, 64), True),
        ((2, 16, 2048, 64), True),
        ((4, 16, 2048, 64), True),
        ((4, 16, 2048, 64), False),
        ((16, 16, 512, 64), False),
        ((2, 16, 1024, 64), False),
        ((4, 16, 1024, 64), False),
        ((8, 16, 1024, 64), False),
        ((8, 16, 2048, 64), True),
        ((16, 16, 2048, 64), True),
        ((2, 16, 4096, 64), True),
        ((4, 16, 4096, 64), True),
        ((4, 16, 4096, 64), False),
        ((1, 16, 8192, 64), True),
        ((2, 16, 8192, 64), False),
        ((1, 16, 16384, 64), True),
        ((1, 16, 16384, 64), False),
        ((1, 16, 32768, 64), True),
        ((8, 16, 1024, 128), True),
        ((16, 16, 1024, 128), True),
        ((32, 16, 1024, 128), True),
        ((64, 16, 1024, 128), True),
        ((32, 16, 512, 128), True),
        ((16, 16, 512, 128), False),
        ((4, 16, 1024, 128), False),
        ((8, 16, 1024, 128), False),
        ((4, 16, 2048, 128), True),
        ((8, 16, 2048, 128), True),
        ((2, 16, 4096, 128), True),
        ((4, 16, 4096, 128), True),
        ((4, 16, 4096, 128), False),
        ((2, 16, 8192, 128), True),
        ((1, 16, 16384, 128), True),
        ((1, 16, 16384, 128), False),
        ((4, 16, 512, 256), True),
        ((8, 16, 512, 256), True),
        ((4, 16, 512, 256), False),
        ((8, 16, 512, 256), False),
        ((16, 16, 512, 256), False),
        ((1, 16, 1024, 256), True),
        ((2, 16, 1024, 256), True),
        ((8, 16, 1024, 256), True),
        ((4, 16, 1024, 256), False),
        ((4, 8, 2048, 256), True),
        ((4, 16, 2048, 256), False),
        ((2, 16, 4096, 256), True),
        ((2, 16, 4096, 256), False),
        ((1, 16, 8192, 256), True),
    ],
    "forward": [
        ((1, 4, 128, 64), True),
        ((8, 16, 512, 64), True),
        ((8, 16, 1024, 64), True),
        ((32, 16, 1024, 64), True),
        ((1, 8, 2048, 64), True),
        ((1, 16, 2048, 64), True),
        ((4, 16, 2048, 64), True),
        ((8, 16, 2048, 64), True),
        ((1, 16, 4096, 64), True),
        ((1, 32, 4096, 64), True),
        ((2, 16, 4096, 64), True),
        ((4, 16, 4096, 64), True),
        ((8, 16, 4096, 64), True),
        ((4, 16, 4096, 64), False),
        ((8, 16, 2048, 64), False),
        ((1, 16, 8192, 64), True),
        ((2, 16, 8192, 64), True),
        ((2, 16, 8192, 64), False),
        ((4, 16, 8192, 64), True),
        ((1, 8, 16384, 64), True),
        ((1, 16, 16384, 64), True),
        ((2, 16, 16384, 64), True),
        ((4, 16, 16384, 64), True),
        ((1, 16, 16384, 64), False),
        ((8, 16, 512, 128), True),
        ((32, 16, 512, 128), True),
        ((8, 16, 512, 128), False),
        ((8, 16, 1024, 128), True),
        ((8, 16, 1024, 128), False),
        ((4, 16, 2048, 128), True),
        ((4, 16, 4096, 128), True),
        ((4, 16, 4096, 128), False),
        ((1, 16, 16384, 128), True),
        ((8, 16, 512, 256), True),
        ((8, 16, 1024, 256), True),
        ((4, 8, 2048, 256), True),
        ((2, 16, 4096, 256), True),
        ((1, 16, 8192, 256), True),
        ((4, 16, 2048, 256), False),
        ((2, 16, 4096, 256), False),
    ],
}
WAYS = {"hopper": "1", "triton": "0"}  # the value of the kernel's switch (FLASHATTN2_HOPPER_FORWARD or _BACKWARD)


def kernel_ms(kernel: str, shape, causal: bool, rounds: int = 3, graph: bool = False) -> dict:
    q, k, v, grad_out = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = shape[-1] ** -0.5
    out, lse = forward.triton_forward(q, k, v, causal, scale)
    if kernel == "forward":
        plans, run = forward.forward_plan, lambda: forward.triton_forward(q, k, v, causal, scale)
    else:
        plans = backward.backward_plan
        run = lambda: backward.triton_backward(grad_out, q, k, v, out, lse, causal, scale)  # noqa: E731
    samples = {way: [] for way in WAYS}
    for round_index in range(rounds):
        for way in sorted(WAYS, reverse=round_index % 2 == 1):
            os.environ[SWITCHES[kernel]] = WAYS[way]
            plans.cache_clear()  # a plan decides at its construction
            samples[way].append(time_ms(run, graph) if graph else triton.testing.do_bench(run, return_mode="median"))
    row = {"shape": shape, "causal": causal, **{way: statistics.median(times) for way, times in samples.items()}}
    row["ratio"] = statistics.median(a / b for a, b in zip(samples["hopper"], samples["triton"]))
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", choices=sorted(SHAPES), default="backward")
    parser.add_argument("--head-dims", type=int, nargs="+", help="only the shapes of these head dims")
    parser.add_argument("--graph", action="store_true", help="time CUDA-graph replays: the GPU's time alone")
    parser.add_argument("--shapes", type=json.loads, help="JSON list of [[B, H, N, D], causal] (default: built in)")
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args(argv)
    shapes = [(tuple(shape), causal) for shape, causal in args.shapes] if args.shapes else SHAPES[args.kernel]
    rows = []
    print(f"{'(B, H, N, D)':20} {'mask':6} {'scores':>12} {'hopper':>8} {'triton':>8} {'ratio':>6}", flush=True)
    with below_thresholds():  # measure below the thresholds too
        for shape, causal in shapes:
            if args.head_dims and shape[-1] not in args.head_dims:
                continue
            row = kernel_ms(args.kernel, shape, causal, graph=args.graph)
            row["scores"] = shape[0] * shape[1] * shape[2] ** 2
            print(
                f"{shape!s:20} {'causal' if causal else 'full':6} {row['scores']:12d} {row['hopper']:8.3f} "
                f"{row['triton']:8.3f} {row['ratio']:6.2f}",
                flush=True,
            )
            rows.append(row)
    os.environ.pop(SWITCHES[args.kernel])
    if args.out:
        write_rows(args.out, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
