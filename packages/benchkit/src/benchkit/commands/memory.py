"""``benchkit memory``: peak GPU memory, a memory timeline, and where the bytes go (:mod:`benchkit.memory`).

For every ``--context-length`` and ``--precision``: the peak of a forward-only step
and of a training step (:func:`benchkit.memory.measure_peak`); for the first pair
also the allocator's history (``snapshot_forward.pickle``,
``snapshot_train-step.pickle``, drawn as ``timeline``); for each training step the
measured breakdown against the formula. Needs a CUDA GPU: without one it says so
and exits with status 2.
"""

from __future__ import annotations

import argparse
import itertools

from benchkit.devices import device_name, resolve_device
from benchkit.errors import BenchkitError
from benchkit.memory import compare_with_formula, measure_peak, plot_peaks, plot_timelines
from benchkit.options import add_output_arguments, add_workload_arguments, default_sizes
from benchkit.plot import save_figure
from benchkit.report import format_table, options_for_json, progress, write_results
from benchkit.units import GIB
from benchkit.workload import GPU_SIZES, WorkloadSettings

HELP = "peak GPU memory by context length and precision, memory timeline, breakdown vs formula (CUDA)"
EXAMPLES = """\
  benchkit memory --size small --context-length 128 256 --precision fp32 bf16
  benchkit memory --size 2.7B --context-length 128 256 512 --precision fp32 bf16
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_workload_arguments(parser, sweep=True, gpu_sizes=GPU_SIZES)
    add_output_arguments(parser, figures=True)


def run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    if device.type != "cuda":
        raise BenchkitError(
            "needs a CUDA GPU (it reads the CUDA caching allocator's peak and history), and none is "
            "visible; the memory formula alone is benchkit.memory.predicted_memory"
        )
    if args.size and len(args.size) > 1:
        raise BenchkitError(f"--size takes one size here, got {' '.join(args.size)}")
    size = (args.size or default_sizes(device, GPU_SIZES))[0]
    args.out.mkdir(parents=True, exist_ok=True)
    grid = list(itertools.product(args.context_length, args.precision, ("forward", "train-step")))
    rows = []
    for i, (context_length, precision, mode) in enumerate(progress(grid, "benchkit memory", total=len(grid))):
        settings = WorkloadSettings(
            size=size,
            context_length=context_length,
            batch_size=args.batch_size,
            mode=mode,
            precision=precision,
            attention=args.attention,
            compile=args.compile,
        )
        snapshot = args.out / f"snapshot_{mode}.pickle" if i < 2 else None  # the first pair's history
        rows.append(measure_peak(settings, device, snapshot_path=snapshot))

    figures = {"timeline": plot_timelines(rows), "peak_memory": plot_peaks(rows)}
    for row in rows:
        row.pop("timeline", None)  # drawn; the snapshots hold it whole
    breakdown = compare_with_formula(rows)

    print(f"device: {device_name()}; {size}, batch {args.batch_size}, attention {args.attention}")
    print(
        format_table(
            [
                {
                    "ctx": r["context_length"],
                    "prec": r["precision"],
                    "mode": r["mode"],
                    "status": r["status"],
                    "peak_GiB": r["peak_bytes"] / GIB if r["status"] == "ok" else None,
                }
                for r in rows
            ]
        )
    )
    print("\nbreakdown of a training step (activations: tensors saved for backward)")
    print(format_table(breakdown))
    path = write_results(args.out, "memory", rows, meta={**options_for_json(args), "size": size}, csv=args.csv)
    print(f"results: {path}")
    for name, figure in figures.items():
        if figure is not None:
            print(f"wrote {save_figure(figure, args.out, name, args.format)}")
    for file in sorted(args.out.glob("snapshot_*.pickle")):
        print(f"wrote {file}")
    return 0
