"""``benchkit memory``: peak GPU memory, a memory timeline, and where the bytes go.

For every ``--context-length`` and ``--precision``, measures the CUDA caching
allocator's peak over one forward-only step (under ``torch.no_grad``) and one
full training step (forward, backward, AdamW), each after one unmeasured step of
the same kind (so AdamW's state already exists). For the first context length
and precision it also records the allocator's history
(``torch.cuda.memory._record_memory_history``) and saves it with
``torch.cuda.memory._dump_snapshot`` as ``snapshot_forward.pickle`` and
``snapshot_train-step.pickle`` (drag them into https://pytorch.org/memory_viz),
and draws the allocated bytes over the allocator's events as ``timeline.png``.
For each training step, parameters, gradients, optimizer state and activations
are measured and set against :func:`benchkit.memory.predicted_memory`.

Needs a CUDA GPU: on a machine without one it says so and exits with status 2.
"""

from __future__ import annotations

import argparse
import itertools
import pickle
from pathlib import Path
from typing import Any

import torch

from benchkit.errors import BenchkitError
from benchkit.memory import measure_breakdown, predicted_memory, timeline_from_snapshot
from benchkit.model import model_config
from benchkit.plot import bar_plot, line_plot
from benchkit.report import add_output_arguments, device_name, format_table, options_for_json, progress, write_results
from benchkit.timing import PhaseTimer
from benchkit.workload import Workload, add_workload_arguments, default_sizes, free_memory, resolve_device

HELP = "peak GPU memory by context length and precision, memory timeline, breakdown vs formula (CUDA)"
EXAMPLES = """\
  benchkit memory --size small --context-length 128 256 --precision fp32 bf16
  benchkit memory --size 2.7B --context-length 128 256 512 --precision fp32 bf16
"""

GIB = 2**30
# Most allocator events kept in the recorded history; a training step of the 2.7B
# model makes tens of thousands, and each costs memory and snapshot size.
MAX_HISTORY_EVENTS = 200_000
# Points drawn per timeline series (each a marker); longer timelines are
# reduced to the maximum of each bucket, which keeps the peaks.
TIMELINE_POINTS = 400


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_workload_arguments(parser, sweep=True)
    add_output_arguments(parser)


def _downsample(values: list[int], points: int) -> tuple[list[float], list[float]]:
    if len(values) <= points:
        return [float(i) for i in range(len(values))], [float(v) for v in values]
    bucket = len(values) / points
    xs, ys = [], []
    for b in range(points):
        lo, hi = int(b * bucket), max(int((b + 1) * bucket), int(b * bucket) + 1)
        xs.append(float(lo))
        ys.append(float(max(values[lo:hi])))
    return xs, ys


def measure_peak(
    size: str,
    context_length: int,
    precision: str,
    mode: str,
    *,
    batch_size: int,
    attention: str,
    compile: bool,
    device: torch.device,
    snapshot_path: Path | None,
) -> dict[str, Any]:
    """Peak allocated bytes of one step of ``mode``; with ``snapshot_path``, also
    record the allocator history, dump it there and return its ``timeline`` (bytes
    after each event). Train steps also get a ``breakdown`` (measured, bytes)."""
    row: dict[str, Any] = dict(size=size, context_length=context_length, precision=precision, mode=mode,
                               batch_size=batch_size, attention=attention)
    free_memory(device)
    torch.cuda.reset_peak_memory_stats(device)
    start_bytes = torch.cuda.memory_allocated(device)
    if snapshot_path is not None:
        torch.cuda.memory._record_memory_history(max_entries=MAX_HISTORY_EVENTS, stacks="python", clear_history=True)
    workload = None
    try:
        config = model_config(size, context_length, attention=attention)
        workload = Workload(config, batch_size=batch_size, device=device, precision=precision, compile=compile)
        timer = PhaseTimer(device)
        workload.step(mode, timer)
        torch.cuda.reset_peak_memory_stats(device)
        workload.step(mode, timer)
        row["peak_bytes"] = torch.cuda.max_memory_allocated(device) - start_bytes
        if snapshot_path is not None:
            torch.cuda.memory._dump_snapshot(str(snapshot_path))
            with open(snapshot_path, "rb") as handle:
                row["timeline"] = timeline_from_snapshot(pickle.load(handle), device=device.index or 0,
                                                         start_bytes=start_bytes)
            torch.cuda.memory._record_memory_history(enabled=None)
            snapshot_path = None
        if mode == "train-step":
            row["breakdown"] = measure_breakdown(workload)
        row["status"] = "ok"
    except torch.OutOfMemoryError:
        row["status"] = "OOM"
    finally:
        if snapshot_path is not None:
            torch.cuda.memory._record_memory_history(enabled=None)
        del workload
        free_memory(device)
    return row


def run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    if device.type != "cuda":
        raise BenchkitError(
            "needs a CUDA GPU (it reads the CUDA caching allocator's peak and history), and none is "
            "visible; the memory formula alone is benchkit.memory.predicted_memory"
        )
    if args.size and len(args.size) > 1:
        raise BenchkitError(f"--size takes one size here, got {' '.join(args.size)}")
    size = (args.size or default_sizes(device))[0]
    args.out.mkdir(parents=True, exist_ok=True)
    grid = list(itertools.product(args.context_length, args.precision, ("forward", "train-step")))
    rows = []
    for i, (context_length, precision, mode) in enumerate(progress(grid, "benchkit memory", total=len(grid))):
        snapshot = args.out / f"snapshot_{mode}.pickle" if i < 2 else None
        rows.append(measure_peak(size, context_length, precision, mode, batch_size=args.batch_size,
                                 attention=args.attention, compile=args.compile, device=device,
                                 snapshot_path=snapshot))

    timelines = {f"{r['mode']} ({r['precision']}, T={r['context_length']})": _downsample(r.pop("timeline"), TIMELINE_POINTS)
                 for r in rows if "timeline" in r}
    for xs, ys in timelines.values():
        ys[:] = [y / GIB for y in ys]
    plots = []
    if timelines:
        plots.append(line_plot(args.out / "timeline.png", timelines, title=f"CUDA memory over two steps (the first creates AdamW state), {size}",
                               xlabel="allocator event", ylabel="allocated GiB"))
    peak_series = {
        f"{precision} {mode}": [next((r["peak_bytes"] / GIB for r in rows if r["status"] == "ok"
                                      and (r["context_length"], r["precision"], r["mode"]) == (t, precision, mode)), None)
                                for t in args.context_length]
        for precision in args.precision for mode in ("forward", "train-step")
    }
    plots.append(bar_plot(args.out / "peak_memory.png", [f"T={t}" for t in args.context_length], peak_series,
                          title=f"Peak CUDA memory, {size}, batch {args.batch_size}", ylabel="GiB"))

    breakdown_rows = []
    for row in rows:
        if row.get("breakdown") is None:
            continue
        predicted = predicted_memory(model_config(size, row["context_length"], attention=args.attention),
                                     args.batch_size, row["precision"])
        row["predicted"] = predicted
        for part, expected in predicted.items():
            measured = row["breakdown"][part]
            breakdown_rows.append({"ctx": row["context_length"], "prec": row["precision"], "part": part,
                                   "measured_GiB": measured / GIB, "formula_GiB": expected / GIB,
                                   "measured/formula": measured / expected})
        breakdown_rows.append({"ctx": row["context_length"], "prec": row["precision"],
                               "part": "allocated after forward",
                               "measured_GiB": row["breakdown"]["allocated_after_forward"] / GIB})

    print(f"device: {device_name()}; {size}, batch {args.batch_size}, attention {args.attention}")
    print(format_table([
        {"ctx": r["context_length"], "prec": r["precision"], "mode": r["mode"], "status": r["status"],
         "peak_GiB": r["peak_bytes"] / GIB if r["status"] == "ok" else None}
        for r in rows
    ]))
    print("\nbreakdown of a training step (activations: tensors saved for backward)")
    print(format_table(breakdown_rows))
    path = write_results(args.out, "memory", rows, meta={**options_for_json(args), "size": size}, csv=args.csv)
    print(f"results: {path}")
    for file in [*plots, *sorted(args.out.glob("snapshot_*.pickle"))]:
        print(f"wrote {file}")
    return 0
