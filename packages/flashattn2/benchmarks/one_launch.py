"""Where the backward should run as one launch: eager forward+backward per call, both ways, by shape.

Usage (CUDA GPU, repository root)::

    PYTHONPATH=packages/flashattn2/src python packages/flashattn2/benchmarks/one_launch.py --out one_launch.json

For each (B, H, N, D) (bf16, causal), milliseconds per eager forward+backward call
(``matrix.host_ms``: many calls enqueued, then one synchronization, so the time is
the host's where the host is slower and the GPU's where the GPU is) with the
backward as one launch (``_one_launch_kernel``) and as two (the dQ and dK/dV
kernels), in alternating rounds; the ratio is the median of the rounds' ratios
(< 1: one launch faster). ``ONE_LAUNCH_MAX_SCORES`` in ``_triton_backward`` is
chosen from this table.
"""

from __future__ import annotations

import argparse
import statistics

import torch
from matrix import host_ms, write_rows  # this folder is on sys.path when run as a script

import flashattn2._triton_backward as backward
from flashattn2 import flash_attention

SHAPES = [
    (1, 4, 128, 64),
    (1, 4, 256, 64),
    (1, 16, 256, 64),
    (1, 8, 512, 64),
    (1, 16, 512, 64),
    (4, 16, 512, 64),
    (1, 16, 1024, 64),
    (8, 16, 1024, 64),
    (1, 16, 512, 128),
    (1, 8, 512, 256),
    (1, 16, 512, 256),
]
WAYS = {"one launch": 2**62, "two launches": 0}  # ONE_LAUNCH_MAX_SCORES that forces each way


def per_call_ms(shape, rounds: int = 15, reps: int = 50) -> dict:
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    grad_out = torch.randn_like(q)

    def step():
        torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), grad_out)

    samples = {way: [] for way in WAYS}
    for round_index in range(rounds):
        for way in sorted(WAYS, reverse=round_index % 2 == 1):
            backward.ONE_LAUNCH_MAX_SCORES = WAYS[way]
            backward.backward_plan.cache_clear()  # a plan decides at its construction
            samples[way].append(host_ms(step, reps))
    ratio = statistics.median(one / two for one, two in zip(samples["one launch"], samples["two launches"]))
    return {"shape": shape, **{way: statistics.median(times) for way, times in samples.items()}, "ratio": ratio}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args(argv)
    default = backward.ONE_LAUNCH_MAX_SCORES
    rows = []
    print(f"{'(B, H, N, D)':22} {'scores':>12} {'one launch':>11} {'two':>9} {'ratio':>6}", flush=True)
    for shape in SHAPES:
        row = per_call_ms(shape)
        b, h, n, _ = shape
        row["scores"] = b * h * n * n
        print(
            f"{shape!s:22} {row['scores']:12d} {row['one launch']:11.4f} {row['two launches']:9.4f} "
            f"{row['ratio']:6.2f}",
            flush=True,
        )
        rows.append(row)
    backward.ONE_LAUNCH_MAX_SCORES = default
    if args.out:
        write_rows(args.out, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
