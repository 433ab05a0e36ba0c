"""``benchkit zero``: ZeRO-1 per-rank memory against its formula, and step time (:mod:`benchkit.zero`).

Runs once per ``--nproc`` value (under ``torchrun``: once, on its processes).
"""

from __future__ import annotations

import argparse
from typing import Any

from benchkit.argtypes import positive_float, positive_int
from benchkit.devices import device_name, resolve_device
from benchkit.options import add_output_arguments, add_rank_arguments, default_nproc, rank_plan_fields
from benchkit.plot import save_figure
from benchkit.ranks import GPU_SIZES, rank_runs
from benchkit.report import format_table, options_for_json, write_results
from benchkit.zero import MEMORY_COLUMNS, TIME_COLUMNS, VARIANTS, ZeroPlan, plot_rows, run_zero

HELP = "ZeRO-1 per-rank memory vs the formula, step time vs ZeroRedundancyOptimizer and plain AdamW"
EXAMPLES = """\
  benchkit zero --nproc 2                                   # CPU: tiny model, 2 gloo processes
  benchkit zero --size small xl --nproc 2 4                 # GPU: NCCL, 2 then 4 GPUs
  torchrun --nproc-per-node 8 -m benchkit zero --size xl    # under torchrun, any number of nodes
"""

DEFAULT_TIMEOUT_S = 900.0  # per group of ranks: the xl runs take minutes; a hang still ends


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_rank_arguments(parser, gpu_sizes=GPU_SIZES, context_length=256, timeout_s=DEFAULT_TIMEOUT_S)
    parser.add_argument(
        "--variants", choices=VARIANTS, nargs="+", default=list(VARIANTS), help="optimizers to compare (default: all)"
    )
    parser.add_argument(
        "--warmup",
        type=positive_int,
        default=3,
        help="untimed steps first; >= 1 so that the optimizer state exists (default: 3)",
    )
    parser.add_argument("--steps", type=positive_int, default=10, help="timed steps (default: 10)")
    parser.add_argument(
        "--bucket-size-mb",
        type=positive_float,
        default=25.0,
        metavar="MB",
        help="bucket cap in MiB of BucketedDDP and of zero1's broadcast (default: 25)",
    )
    add_output_arguments(parser, figures=True)


def run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    plan = ZeroPlan(
        **rank_plan_fields(args, device, GPU_SIZES),
        variants=tuple(args.variants),
        bucket_size_mb=args.bucket_size_mb,
    )
    rows: list[dict[str, Any]] = []
    for nproc in rank_runs(args.nproc or default_nproc(device)):
        measured = run_zero(plan, nproc=nproc, timeout_s=args.timeout_s)
        if measured is None:
            return 0  # a rank other than 0 under torchrun: rank 0 reports
        rows += measured

    print(
        f"device: {device_name()}; context {args.context_length}, batch {args.batch_size} per rank, "
        f"fp32; {args.warmup} warm-up + {args.steps} timed steps"
    )
    print(format_table(rows, TIME_COLUMNS))
    print()
    print(format_table(rows, MEMORY_COLUMNS))
    path = write_results(args.out, "zero", rows, meta=options_for_json(args), csv=args.csv)
    figures = plot_rows(rows, "before_step_MiB" if device.type == "cuda" else "state_MiB")
    plots = [save_figure(figure, args.out, name, args.format) for name, figure in figures.items()]
    print(f"results: {path}; plots: {', '.join(str(p) for p in plots)}")
    return 0
