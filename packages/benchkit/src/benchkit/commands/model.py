"""``benchkit model``: time the reference model's forward, backward and optimizer phases.

For every combination of ``--size``, ``--context-length``, ``--mode`` and
``--precision``, builds the model, runs ``--warmup`` untimed steps and
``--steps`` timed ones, and reports per phase and per step the mean, standard
deviation, median, minimum and maximum (milliseconds in the table, seconds in
the JSON), tokens per second, and on a GPU with a known peak the model FLOPs
utilization (formula and peaks in :mod:`benchkit.flops`). A configuration that
runs out of GPU memory is recorded as OOM and the sweep goes on.
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

import torch

from benchkit.argtypes import non_negative_int, positive_int
from benchkit.flops import model_flops, peak_flops
from benchkit.model import model_config, parameter_count
from benchkit.report import add_output_arguments, device_name, format_table, options_for_json, progress, write_results
from benchkit.workload import (
    MODES,
    Workload,
    add_workload_arguments,
    default_sizes,
    free_memory,
    measure,
    resolve_device,
)

HELP = "time forward / backward / optimizer phases of the reference Transformer"
EXAMPLES = """\
  benchkit model --size tiny --mode train-step             # CPU: seconds
  benchkit model --size tiny --warmup 0 --steps 5          # the cost of the first steps
  benchkit model --size small medium large xl 2.7B --mode forward forward-backward
  benchkit model --size xl --mode train-step --precision bf16 --attention flashattn2 --compile
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_workload_arguments(parser, sweep=True)
    parser.add_argument("--mode", choices=MODES, nargs="+", default=["train-step"], help="what one step runs (default: train-step)")
    parser.add_argument("--warmup", type=non_negative_int, default=5, help="untimed steps before measuring (default: 5)")
    parser.add_argument("--steps", type=positive_int, default=10, help="timed steps (default: 10)")
    add_output_arguments(parser)


def benchmark(
    size: str,
    context_length: int,
    mode: str,
    precision: str,
    *,
    batch_size: int,
    attention: str,
    compile: bool,
    device: torch.device,
    warmup: int,
    steps: int,
) -> dict[str, Any]:
    """Measure one configuration; return its result row (see the module docstring).

    The row holds the configuration, ``phases`` (phase name -> Stats in seconds),
    ``step`` (Stats of whole steps), ``tokens_per_s`` (tokens per mean step),
    ``model_flops`` (per step), ``mfu`` (fraction, or None off GPU or for an unknown
    device), and ``status`` ("ok" or "OOM").
    """
    config = model_config(size, context_length, attention=attention)
    row: dict[str, Any] = dict(
        size=size, parameters=parameter_count(config), context_length=context_length, batch_size=batch_size,
        mode=mode, precision=precision, attention=attention, compile=compile, warmup=warmup, steps=steps,
    )
    workload = stats = None
    try:
        workload = Workload(config, batch_size=batch_size, device=device, precision=precision, compile=compile)
        stats = measure(workload, mode, warmup=warmup, steps=steps)
    except torch.OutOfMemoryError:
        pass  # recorded below; memory is freed once the exception (and its frames) are gone
    del workload
    free_memory(device)
    if stats is None:
        return {**row, "status": "OOM"}
    step = stats.pop("step")
    flops = model_flops(config, batch_size, context_length, backward=mode != "forward")
    peak = peak_flops(torch.cuda.get_device_name(device), precision,
                      float32_matmul_precision=torch.get_float32_matmul_precision()) if device.type == "cuda" else None
    return {
        **row,
        "status": "ok",
        "phases": stats,
        "step": step,
        "tokens_per_s": batch_size * context_length / step.mean,
        "model_flops": flops,
        "peak_flops": peak,
        "mfu": flops / step.mean / peak if peak else None,
    }


def table_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The printed view of result rows: parameters in millions, times in milliseconds, MFU in percent."""
    printed = []
    for row in rows:
        line = {"size": row["size"], "params_M": row["parameters"] / 1e6, "ctx": row["context_length"],
                "mode": row["mode"], "prec": row["precision"]}
        if row["status"] != "ok":
            printed.append({**line, "status": row["status"]})
            continue
        for phase, short in (("forward", "fwd_ms"), ("backward", "bwd_ms"), ("optimizer", "opt_ms")):
            line[short] = row["phases"][phase].mean * 1e3 if phase in row["phases"] else None
        step = row["step"]
        line.update({
            "step_ms": step.mean * 1e3, "std_ms": step.std * 1e3, "median_ms": step.median * 1e3,
            "min_ms": step.min * 1e3, "max_ms": step.max * 1e3, "tokens/s": row["tokens_per_s"],
            "MFU_%": row["mfu"] * 100 if row["mfu"] is not None else None,
        })
        printed.append(line)
    return printed


def run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    sizes = args.size or default_sizes(device)
    grid = list(itertools.product(sizes, args.context_length, args.mode, args.precision))
    rows = [
        benchmark(size, context_length, mode, precision, batch_size=args.batch_size, attention=args.attention,
                  compile=args.compile, device=device, warmup=args.warmup, steps=args.steps)
        for size, context_length, mode, precision in progress(grid, "benchkit model", total=len(grid))
    ]
    print(f"device: {device_name()}; batch {args.batch_size}; "
          f"{args.warmup} warm-up + {args.steps} timed steps; attention {args.attention}"
          f"{'; torch.compile' if args.compile else ''}")
    print(format_table(table_rows(rows)))
    path = write_results(args.out, "model", rows, meta=options_for_json(args), csv=args.csv)
    print(f"results: {path}")
    return 0

