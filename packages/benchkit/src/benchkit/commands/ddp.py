"""``benchkit ddp``: the data-parallel wrappers of :mod:`ddp` side by side with PyTorch DDP
(:mod:`benchkit.data_parallel`).

Runs once per ``--nproc`` value (under ``torchrun``: once, on its processes).
Exits with status 1 if a variant failed (its row says how).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from benchkit.argtypes import non_negative_int, positive_float, positive_int
from benchkit.data_parallel import (
    DEFAULT_BUCKET_MB,
    KINDS,
    DataParallelPlan,
    add_derived_columns,
    plot_rows,
    run_data_parallel,
    table_rows,
    variant_names,
)
from benchkit.devices import device_name, resolve_device
from benchkit.options import (
    add_attention_argument,
    add_output_arguments,
    add_precision_argument,
    add_rank_arguments,
    default_nproc,
    rank_plan_fields,
)
from benchkit.plot import save_figure
from benchkit.ranks import GPU_SIZES, backend_for, rank_runs
from benchkit.report import format_table, options_for_json, write_results

HELP = "step time and non-hidden communication of the ddp wrappers vs PyTorch DDP"
EXAMPLES = """\
  benchkit ddp --device cpu --size tiny --nproc 2 --steps 3     # CPU, gloo: seconds
  benchkit ddp --nproc 2 4 --size small xl --precision bf16     # GPUs, NCCL: 2 ranks, then 4
  benchkit ddp --nproc 4 --size xl --variants bucketed torch-ddp --bucket-mb 25 --rounds 3   # interleaved
  torchrun --nproc-per-node 4 -m benchkit ddp --size xl --precision bf16   # under torchrun
"""

DEFAULT_TIMEOUT_S = 3600.0  # generous: the xl runs take minutes; a hang still ends


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_rank_arguments(parser, gpu_sizes=GPU_SIZES, context_length=512, timeout_s=DEFAULT_TIMEOUT_S)
    add_precision_argument(parser)
    add_attention_argument(parser)
    parser.add_argument(
        "--variants",
        choices=KINDS,
        nargs="+",
        default=[k for k in KINDS if k != "bucketed-bf16"],
        help="which variants to run (default: all but bucketed-bf16, BucketedDDP with compress_bf16=True)",
    )
    parser.add_argument(
        "--bucket-mb",
        type=positive_float,
        nargs="+",
        default=list(DEFAULT_BUCKET_MB),
        metavar="MB",
        help="BucketedDDP bucket caps in MiB (default: 1 10 25 100 1000)",
    )
    parser.add_argument("--warmup", type=non_negative_int, default=3, help="untimed steps per variant (default: 3)")
    parser.add_argument("--steps", type=positive_int, default=10, help="timed steps per variant (default: 10)")
    parser.add_argument(
        "--rounds",
        type=positive_int,
        default=1,
        help="run the variants this many times, each round starting one variant later, and pool "
        "each variant's timed steps (default: 1)",
    )
    add_output_arguments(parser, figures=True)


def run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    plan = DataParallelPlan(
        **rank_plan_fields(args, device, GPU_SIZES),
        precision=args.precision,
        attention=args.attention,
        variants=tuple(variant_names(args.variants, args.bucket_mb)),
        rounds=args.rounds,
        out_dir=str(args.out),
    )
    rows: list[dict[str, Any]] = []
    for nproc in rank_runs(args.nproc or default_nproc(device)):
        run_plan = dataclasses.replace(plan, earlier_rows=tuple(rows))
        measured = run_data_parallel(run_plan, nproc=nproc, timeout_s=args.timeout_s)
        if measured is None:
            return 0  # a rank other than 0 under torchrun: rank 0 reports
        rows += measured

    add_derived_columns(rows)
    backend = backend_for(plan.device_type)
    world_sizes = sorted({row["world_size"] for row in rows})
    print(
        f"device: {device_name()}; {' and '.join(map(str, world_sizes))} ranks over {backend}; "
        f"{plan.batch_size} x {plan.context_length} tokens per rank; {plan.precision}; "
        f"{args.warmup} warm-up + {args.steps} timed steps" + (f", {args.rounds} rounds" if args.rounds > 1 else "")
    )
    print(format_table(table_rows(rows)))
    meta = {**options_for_json(args), "world_sizes": world_sizes, "backend": backend}
    path = write_results(args.out, "ddp", rows, meta=meta, csv=args.csv)
    print(f"results: {path}")
    for name, figure in plot_rows(rows, backend=backend).items():
        print(f"plot: {save_figure(figure, args.out, name, args.format)}")
    return 0 if all(row["status"] == "ok" for row in rows) else 1
