"""Where the Hopper backward should run, and with how many chains: backward time by shape, each way.

Usage (Hopper GPU, Triton 3.6, repository root)::

    PYTHONPATH=packages/flashattn2/src python packages/flashattn2/benchmarks/hopper_backward.py --out hopper.json

For each (B, H, N, 64) shape and mask (bf16), milliseconds of ``triton_backward``
(``triton.testing.do_bench`` median) with the Hopper kernel adding dQ in one chain,
in two chains (causal only), and with the Triton kernels, in alternating rounds;
the ratios to the Triton kernels are the medians of the rounds' ratios (< 1: the
Hopper kernel is faster). ``MIN_SCORES`` and ``TWO_CHAINS_MIN_SEQ_LEN`` in
``_gluon_backward`` are chosen from this table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import torch
import triton
from matrix import environment  # this folder is on sys.path when run as a script

import flashattn2._gluon_backward as hopper
import flashattn2._triton_backward as backward
from flashattn2._triton_forward import triton_forward

SHAPES = [
    ((8, 16, 1024, 64), True),
    ((4, 16, 2048, 64), True),
    ((2, 16, 4096, 64), True),
    ((4, 16, 4096, 64), True),
    ((4, 16, 4096, 64), False),
    ((1, 16, 8192, 64), True),
    ((2, 16, 8192, 64), False),
    ((1, 16, 16384, 64), True),
    ((1, 16, 16384, 64), False),
    ((1, 16, 32768, 64), True),
]
# (FLASHATTN2_HOPPER_BACKWARD, TWO_CHAINS_MIN_SEQ_LEN) of each way
WAYS = {"hopper, 1 chain": ("1", 2**62), "hopper, 2 chains": ("1", 0), "triton": ("0", 0)}


def backward_ms(shape, causal: bool, rounds: int = 3) -> dict:
    q, k, v, grad_out = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = shape[-1] ** -0.5
    out, lse = triton_forward(q, k, v, causal, scale)
    ways = [way for way in WAYS if causal or "2 chains" not in way]
    samples = {way: [] for way in ways}
    for round_index in range(rounds):
        for way in sorted(ways, reverse=round_index % 2 == 1):
            os.environ["FLASHATTN2_HOPPER_BACKWARD"], hopper.TWO_CHAINS_MIN_SEQ_LEN = WAYS[way]
            backward.backward_plan.cache_clear()  # a plan decides at its construction
            samples[way].append(
                triton.testing.do_bench(
                    lambda: backward.triton_backward(grad_out, q, k, v, out, lse, causal, scale), return_mode="median"
                )
            )
    row = {"shape": shape, "causal": causal, **{way: statistics.median(times) for way, times in samples.items()}}
    for way in ways[:-1]:
        row[f"{way} / triton"] = statistics.median(a / b for a, b in zip(samples[way], samples["triton"]))
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args(argv)
    defaults = hopper.MIN_SCORES, hopper.TWO_CHAINS_MIN_SEQ_LEN
    hopper.MIN_SCORES = 0
    rows = []
    print(f"{'(B, H, N, D)':20} {'mask':6} {'1 chain':>8} {'2 chains':>9} {'triton':>8} {'ratios':>12}", flush=True)
    for shape, causal in SHAPES:
        row = backward_ms(shape, causal)
        ratios = " ".join(f"{value:.2f}" for key, value in row.items() if key.endswith("/ triton"))
        print(
            f"{shape!s:20} {'causal' if causal else 'full':6} {row['hopper, 1 chain']:8.3f} "
            f"{row.get('hopper, 2 chains', float('nan')):9.3f} {row['triton']:8.3f} {ratios:>12}",
            flush=True,
        )
        rows.append(row)
    hopper.MIN_SCORES, hopper.TWO_CHAINS_MIN_SEQ_LEN = defaults
    os.environ.pop("FLASHATTN2_HOPPER_BACKWARD")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"env": environment(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
