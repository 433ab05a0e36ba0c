"""``benchkit allreduce``: all-reduce time and bandwidth by backend, message size and world size.

For each backend (``gloo`` on CPU tensors, ``nccl`` on GPU tensors, one GPU per
rank) and world size, spawns that many ranks on this node through
:func:`ddp.launch.spawn`; each rank all-reduces (sum, in place) a tensor of
each ``--sizes-mb`` size ``--warmup`` times untimed, then ``--iters`` times
timed, one call at a time after a barrier (CUDA events on a GPU). An
iteration's time is the slowest rank's, since the collective ends when its last
rank is done. Reported per cell, in the convention of nccl-tests
(NVIDIA, nccl-tests ``doc/PERFORMANCE.md``):

- ``ms``: mean (± std, median) time of one all-reduce;
- ``algbw_GBps``: algorithm bandwidth, message bytes / time (GB = 1e9 bytes);
- ``busbw_GBps``: bus bandwidth, ``algbw * 2 (n - 1) / n`` for ``n`` ranks, the
  rate each link carries in a ring all-reduce, which does not depend on ``n``
  and compares with the hardware's link bandwidth.

Sizes are in MiB (2**20 bytes); 1024 is the "1 GB" row. World sizes beyond the
machine (GPUs for NCCL, CPU cores for gloo) are skipped and listed.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import torch
import torch.distributed as dist
from ddp.launch import spawn

from benchkit.argtypes import non_negative_int, positive_float, positive_int
from benchkit.errors import BenchkitError
from benchkit.plot import line_plot
from benchkit.ranks import launched_by_torchrun
from benchkit.report import add_output_arguments, device_name, format_table, options_for_json, progress, write_results
from benchkit.timing import PhaseTimer, summarize

HELP = "all-reduce ms, algorithm and bus bandwidth: gloo/NCCL x message size x world size"
EXAMPLES = """\
  benchkit allreduce --backend gloo --world-sizes 2 --sizes-mb 0.1 1 --iters 5   # CPU: seconds
  benchkit allreduce                                   # gloo (+ NCCL on GPUs), 1 MiB - 1 GiB, 2/4/6 ranks
  benchkit allreduce --backend nccl --world-sizes 2 4 8 --dtype bf16
"""

BACKENDS = ("gloo", "nccl")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
BYTES_PER_MIB = 2**20
GB = 1e9  # bandwidths in GB/s, 1e9 bytes per second, as nccl-tests reports them
DEFAULT_TIMEOUT_S = 600.0  # per spawned run; gloo's 1 GiB cells at 6 ranks take tens of seconds


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=BACKENDS, nargs="+", default=None,
                        help="default: gloo, plus nccl when at least 2 GPUs are visible")
    parser.add_argument("--sizes-mb", type=positive_float, nargs="+", default=[1.0, 10.0, 100.0, 1024.0],
                        metavar="MIB", help="message sizes in MiB (default: 1 10 100 1024)")
    parser.add_argument("--world-sizes", type=positive_int, nargs="+", default=[2, 4, 6], metavar="N",
                        help="numbers of ranks (default: 2 4 6, as many as the machine has)")
    parser.add_argument("--dtype", choices=list(DTYPES), default="fp32", help="element type (default: fp32)")
    parser.add_argument("--warmup", type=non_negative_int, default=5, help="untimed calls per cell (default: 5)")
    parser.add_argument("--iters", type=positive_int, default=20, help="timed calls per cell (default: 20)")
    parser.add_argument("--timeout-s", type=positive_float, default=DEFAULT_TIMEOUT_S,
                        help="deadline of each spawned run (one per backend and world size; default: 600)")
    add_output_arguments(parser)


def bus_bandwidth(algbw: float, world_size: int) -> float:
    """nccl-tests' bus bandwidth of an all-reduce: ``algbw * 2 (n - 1) / n``."""
    return algbw * 2 * (world_size - 1) / world_size


def _elements(size_mb: float, dtype: str) -> int:
    """Elements of the all-reduced tensor of ``size_mb`` MiB (at least one)."""
    return max(1, round(size_mb * BYTES_PER_MIB / DTYPES[dtype].itemsize))


def time_allreduce(rank: int, world_size: int, sizes_mb: list[float], dtype: str, warmup: int,
                   iters: int) -> list[list[float]]:
    """One rank: seconds of each timed all-reduce, one list per size (inside an initialized group)."""
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", rank)
        barrier_options = {"device_ids": [rank]}
    else:
        device = torch.device("cpu")
        barrier_options = {}
    samples = []
    for size_mb in sizes_mb:
        # zeros: the repeated in-place sums stay finite
        tensor = torch.zeros(_elements(size_mb, dtype), dtype=DTYPES[dtype], device=device)
        timer = PhaseTimer(device)
        for call in range(warmup + iters):
            if call == warmup:
                timer.clear()
            dist.barrier(**barrier_options)
            with timer.phase("allreduce"):
                dist.all_reduce(tensor)
        samples.append(timer.samples["allreduce"])
        del tensor
    return samples


def _cells(backends: list[str], world_sizes: list[int]) -> tuple[list[tuple[str, int]], list[str]]:
    """The (backend, world size) runs this machine can make, and a note for each skipped one."""
    limits = {"gloo": (os.cpu_count() or 1, "CPU cores"), "nccl": (torch.cuda.device_count(), "GPUs")}
    cells, skipped = [], []
    for backend in backends:
        limit, what = limits[backend]
        for n in world_sizes:
            if n <= limit:
                cells.append((backend, n))
            else:
                skipped.append(f"{backend} x {n} ranks (this machine has {limit} {what})")
    return cells, skipped


def result_rows(backend: str, world_size: int, sizes_mb: list[float], dtype: str,
                per_rank: list[list[list[float]]]) -> list[dict[str, Any]]:
    """Rows of one spawned run; ``per_rank[r][s][i]`` is rank r's i-th time (s) at size index s."""
    rows = []
    for index, size_mb in enumerate(sizes_mb):
        slowest = [max(times) for times in zip(*(rank_samples[index] for rank_samples in per_rank))]
        stats = summarize(slowest)
        nbytes = _elements(size_mb, dtype) * DTYPES[dtype].itemsize
        algbw = nbytes / stats.mean / GB
        rows.append({"backend": backend, "world_size": world_size, "size_mb": size_mb, "bytes": nbytes,
                     "dtype": dtype, "time": stats, "ms": stats.mean * 1e3, "std_ms": stats.std * 1e3,
                     "median_ms": stats.median * 1e3, "algbw_GBps": algbw,
                     "busbw_GBps": bus_bandwidth(algbw, world_size)})
    return rows


def run(args: argparse.Namespace) -> int:
    if launched_by_torchrun():
        raise BenchkitError("benchkit allreduce starts its own ranks for each world size; run it without torchrun")
    backends = args.backend or (["gloo", "nccl"] if torch.cuda.device_count() >= 2 else ["gloo"])
    if "nccl" in backends and not torch.cuda.is_available():
        raise BenchkitError("--backend nccl needs CUDA GPUs, and none is visible on this machine")
    cells, skipped = _cells(backends, args.world_sizes)
    if not cells:
        raise BenchkitError(f"no run fits this machine: skipped {'; '.join(skipped)}")
    rows = []
    for backend, world_size in progress(cells, "benchkit allreduce"):
        per_rank = spawn(time_allreduce, world_size, backend=backend, timeout_s=args.timeout_s,
                         args=(args.sizes_mb, args.dtype, args.warmup, args.iters))
        rows += result_rows(backend, world_size, args.sizes_mb, args.dtype, per_rank)

    print(f"device: {device_name()}; {args.dtype}; {args.warmup} warm-up + {args.iters} timed calls")
    if skipped:
        print(f"skipped: {'; '.join(skipped)}")
    print(format_table(rows, ["backend", "world_size", "size_mb", "ms", "std_ms", "median_ms", "algbw_GBps",
                              "busbw_GBps"]))
    meta = {**options_for_json(args), "skipped": skipped}
    path = write_results(args.out, "allreduce", rows, meta=meta, csv=args.csv)
    print(f"results: {path}")
    by_cell = {f"{b} x {n} ranks": [r for r in rows if (r["backend"], r["world_size"]) == (b, n)] for b, n in cells}
    for column, name, ylabel in (("busbw_GBps", "allreduce_busbw", "bus bandwidth (GB/s)"), ("ms", "allreduce_ms", "ms")):
        series = {label: ([r["size_mb"] for r in cell], [r[column] for r in cell]) for label, cell in by_cell.items()}
        png = line_plot(args.out / f"{name}.png", series, title=f"All-reduce, {args.dtype}: {ylabel}",
                        xlabel="message size (MiB)", ylabel=ylabel, log_x=True, log_y=True)
        print(f"plot: {png}")
    return 0
