"""``benchkit allreduce``: all-reduce time and bandwidth by backend, message size and world size
(:mod:`benchkit.allreduce`)."""

from __future__ import annotations

import argparse

from benchkit.allreduce import BACKENDS, DTYPE_NAMES, AllreduceSweep, plot_rows, run_allreduce
from benchkit.argtypes import non_negative_int, positive_float, positive_int
from benchkit.devices import device_name
from benchkit.options import add_output_arguments
from benchkit.plot import save_figure
from benchkit.report import format_table, options_for_json, write_results

HELP = "all-reduce ms, algorithm and bus bandwidth: gloo/NCCL x message size x world size"
EXAMPLES = """\
  benchkit allreduce --backend gloo --world-sizes 2 --sizes-mb 0.1 1 --iters 5   # CPU: seconds
  benchkit allreduce                                   # gloo (+ NCCL on GPUs), 1 MiB - 1 GiB, 2/4/6 ranks
  benchkit allreduce --backend nccl --world-sizes 2 4 8 --dtype bf16
"""
DEFAULTS = AllreduceSweep()
COLUMNS = ["backend", "world_size", "size_mb", "ms", "std_ms", "median_ms", "algbw_GBps", "busbw_GBps"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        nargs="+",
        default=None,
        help="default: gloo, plus nccl when at least 2 GPUs are visible",
    )
    parser.add_argument(
        "--sizes-mb",
        type=positive_float,
        nargs="+",
        default=list(DEFAULTS.sizes_mb),
        metavar="MIB",
        help="message sizes in MiB (default: 1 10 100 1024)",
    )
    parser.add_argument(
        "--world-sizes",
        type=positive_int,
        nargs="+",
        default=list(DEFAULTS.world_sizes),
        metavar="N",
        help="numbers of ranks (default: 2 4 6, as many as the machine has)",
    )
    parser.add_argument("--dtype", choices=DTYPE_NAMES, default=DEFAULTS.dtype, help="element type (default: fp32)")
    parser.add_argument(
        "--warmup",
        type=non_negative_int,
        default=DEFAULTS.warmup,
        help=f"untimed calls per cell (default: {DEFAULTS.warmup})",
    )
    parser.add_argument(
        "--iters", type=positive_int, default=DEFAULTS.iters, help=f"timed calls per cell (default: {DEFAULTS.iters})"
    )
    parser.add_argument(
        "--timeout-s",
        type=positive_float,
        default=DEFAULTS.timeout_s,
        help=f"deadline of each spawned run (one per backend and world size; default: {DEFAULTS.timeout_s:g})",
    )
    add_output_arguments(parser, figures=True)


def run(args: argparse.Namespace) -> int:
    rows, skipped = run_allreduce(
        AllreduceSweep(
            backends=tuple(args.backend) if args.backend else None,
            sizes_mb=tuple(args.sizes_mb),
            world_sizes=tuple(args.world_sizes),
            dtype=args.dtype,
            warmup=args.warmup,
            iters=args.iters,
            timeout_s=args.timeout_s,
        )
    )
    print(f"device: {device_name()}; {args.dtype}; {args.warmup} warm-up + {args.iters} timed calls")
    if skipped:
        print(f"skipped: {'; '.join(skipped)}")
    print(format_table(rows, COLUMNS))
    path = write_results(args.out, "allreduce", rows, meta={**options_for_json(args), "skipped": skipped}, csv=args.csv)
    print(f"results: {path}")
    for name, figure in plot_rows(rows).items():
        print(f"plot: {save_figure(figure, args.out, name, args.format)}")
    return 0
