"""``benchkit precision``: the mixed-precision facts, measured on this machine (:mod:`benchkit.precision`).

Each part (``--part``, default all) prints a table and writes ``precision_<part>.json``;
step-time also draws ``precision_step_time.<format>``.
"""

from __future__ import annotations

import argparse

from benchkit.argtypes import finite_float, non_negative_int, positive_int
from benchkit.devices import resolve_device
from benchkit.options import (
    add_device_argument,
    add_output_arguments,
    add_precision_argument,
    add_size_argument,
    default_sizes,
)
from benchkit.plot import save_figure
from benchkit.precision import (
    GPU_SIZES,
    PARTS,
    StepTimeSweep,
    accumulation_rows,
    autocast_rows,
    plot_step_time,
    step_time_rows,
)
from benchkit.report import format_table, write_results

HELP = "mixed precision: fp16/bf16 accumulation error, autocast dtypes per layer, fp32 vs bf16 step time"
EXAMPLES = """\
  benchkit precision                                   # all three parts; tiny model on a CPU
  benchkit precision --part accumulation --value 0.1 --count 10000
  benchkit precision --part autocast --device cuda
  benchkit precision --part step-time --size small medium large xl 2.7B --precision fp32 bf16
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--part", choices=PARTS, nargs="+", default=list(PARTS), help="what to run (default: all)")
    parser.add_argument(
        "--value", type=finite_float, default=0.01, help="accumulation: the addend, a finite number (default: 0.01)"
    )
    parser.add_argument("--count", type=positive_int, default=1000, help="accumulation: additions (default: 1000)")
    add_size_argument(parser, gpu_sizes=GPU_SIZES, what="step-time: model sizes")
    add_precision_argument(parser, many=True, default=("fp32", "bf16"))
    parser.add_argument(
        "--context-length",
        type=positive_int,
        default=256,
        metavar="T",
        help="step-time: tokens per sequence (default: 256)",
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=4, metavar="B", help="step-time: sequences per step (default: 4)"
    )
    parser.add_argument("--warmup", type=non_negative_int, default=5, help="step-time: untimed steps (default: 5)")
    parser.add_argument("--steps", type=positive_int, default=10, help="step-time: timed steps (default: 10)")
    add_device_argument(parser)
    add_output_arguments(parser, figures=True)


def run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    written = []
    if "accumulation" in args.part:
        rows = accumulation_rows(args.value, args.count)
        print(f"sum of {args.value!r} added {args.count} times (exact: {rows[0]['exact']!r})")
        print(format_table(rows) + "\n")
        written.append(
            write_results(
                args.out, "precision_accumulation", rows, meta={"value": args.value, "count": args.count}, csv=args.csv
            )
        )
    if "autocast" in args.part:
        rows = autocast_rows(device)
        print(f"dtypes under torch.autocast on {device} (model: Linear -> ReLU -> LayerNorm -> Linear)")
        print(format_table(rows) + "\n")
        written.append(write_results(args.out, "precision_autocast", rows, meta={"device": str(device)}, csv=args.csv))
    if "step-time" in args.part:
        sweep = StepTimeSweep(
            sizes=tuple(args.size or default_sizes(device, GPU_SIZES)),
            precisions=tuple(args.precision),
            context_length=args.context_length,
            batch_size=args.batch_size,
            warmup=args.warmup,
            steps=args.steps,
        )
        rows = step_time_rows(sweep, device)
        print(f"train-step time on {device}, batch {args.batch_size} x {args.context_length} tokens")
        print(format_table(rows) + "\n")
        meta = {"device": str(device), "warmup": args.warmup, "steps": args.steps, "mode": "train-step"}
        written.append(write_results(args.out, "precision_step_time", rows, meta=meta, csv=args.csv))
        figure = plot_step_time(rows)
        if figure is not None:
            written.append(save_figure(figure, args.out, "precision_step_time", args.format))
    print("wrote " + ", ".join(str(p) for p in written))
    return 0
