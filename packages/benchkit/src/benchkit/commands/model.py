"""``benchkit model``: time the reference model's forward, backward and optimizer phases.

For every combination of ``--size``, ``--context-length``, ``--mode`` and
``--precision``, :func:`benchkit.workload.benchmark` builds the model, runs
``--warmup`` untimed steps and ``--steps`` timed ones, and reports per phase and
per step the mean, standard deviation, median, minimum and maximum
(milliseconds in the table, seconds in the JSON), tokens per second, and on a
GPU with a known peak the model FLOPs utilization (:mod:`benchkit.flops`). A
configuration that runs out of GPU memory is recorded as OOM and the sweep goes on.
"""

from __future__ import annotations

import argparse
import itertools

from benchkit.argtypes import non_negative_int, positive_int
from benchkit.devices import device_name, resolve_device
from benchkit.options import add_output_arguments, add_workload_arguments, default_sizes
from benchkit.report import format_table, options_for_json, progress, write_results
from benchkit.training import MODES
from benchkit.workload import GPU_SIZES, WorkloadSettings, benchmark, table_rows

HELP = "time forward / backward / optimizer phases of the reference Transformer"
EXAMPLES = """\
  benchkit model --size tiny --mode train-step             # CPU: seconds
  benchkit model --size tiny --warmup 0 --steps 5          # the cost of the first steps
  benchkit model --size small medium large xl 2.7B --mode forward forward-backward
  benchkit model --size xl --mode train-step --precision bf16 --attention flashattn2 --compile
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_workload_arguments(parser, sweep=True, gpu_sizes=GPU_SIZES)
    parser.add_argument(
        "--mode", choices=MODES, nargs="+", default=["train-step"], help="what one step runs (default: train-step)"
    )
    parser.add_argument(
        "--warmup", type=non_negative_int, default=5, help="untimed steps before measuring (default: 5)"
    )
    parser.add_argument("--steps", type=positive_int, default=10, help="timed steps (default: 10)")
    add_output_arguments(parser)


def run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    grid = [
        WorkloadSettings(
            size=size,
            context_length=context_length,
            batch_size=args.batch_size,
            mode=mode,
            precision=precision,
            attention=args.attention,
            compile=args.compile,
            warmup=args.warmup,
            steps=args.steps,
        )
        for size, context_length, mode, precision in itertools.product(
            args.size or default_sizes(device, GPU_SIZES), args.context_length, args.mode, args.precision
        )
    ]
    rows = [benchmark(settings, device) for settings in progress(grid, "benchkit model")]
    print(
        f"device: {device_name()}; batch {args.batch_size}; "
        f"{args.warmup} warm-up + {args.steps} timed steps; attention {args.attention}"
        f"{'; torch.compile' if args.compile else ''}"
    )
    print(format_table(table_rows(rows)))
    path = write_results(args.out, "model", rows, meta=options_for_json(args), csv=args.csv)
    print(f"results: {path}")
    return 0
