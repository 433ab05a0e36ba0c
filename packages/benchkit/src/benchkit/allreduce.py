"""All-reduce time and bandwidth by backend, message size and world size (``benchkit allreduce``).

For each backend (``gloo`` on CPU tensors, ``nccl`` on GPU tensors, one GPU per
rank) and world size, spawns that many ranks on this node through
:func:`ddp.launch.spawn`; each rank all-reduces (sum, in place) a tensor of
each size ``warmup`` times untimed, then ``iters`` times timed, one call at
a time after a barrier (CUDA events on a GPU). An iteration's time is the
slowest rank's, since the collective ends when its last rank is done. Reported per cell, in the convention of nccl-tests
(NVIDIA, nccl-tests ``doc/PERFORMANCE.md``):

- ``ms``: mean (± std, median) time of one all-reduce;
- ``algbw_GBps``: algorithm bandwidth, message bytes / time (GB = 1e9 bytes);
- ``busbw_GBps``: bus bandwidth, ``algbw * 2 (n - 1) / n`` for ``n`` ranks, the
  rate each link carries in a ring all-reduce, which does not depend on ``n``
  and compares with the hardware's link bandwidth.

Sizes are in MiB (2**20 bytes); 1024 is the "1 GB" row. World sizes beyond the
machine (GPUs for NCCL, CPU cores for gloo) are skipped and listed.

Example::

    from benchkit.allreduce import AllreduceSweep, run_allreduce

    sweep = AllreduceSweep(backends=("gloo",), sizes_mb=(0.1, 1.0), world_sizes=(2,), iters=5)
    rows, skipped = run_allreduce(sweep)
    print([(r["size_mb"], r["ms"], r["busbw_GBps"]) for r in rows])
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from benchkit.errors import BenchkitError
from benchkit.ranks import launched_by_torchrun
from benchkit.report import progress
from benchkit.timing import PhaseTimer, summarize
from benchkit.units import DTYPES, GB, MIB
from ddp.launch import spawn

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "BACKENDS",
    "DTYPE_NAMES",
    "AllreduceSweep",
    "bus_bandwidth",
    "plot_rows",
    "result_rows",
    "run_allreduce",
    "time_allreduce",
]

BACKENDS = ("gloo", "nccl")
DTYPE_NAMES = ("fp32", "bf16")
DEFAULT_TIMEOUT_S = 600.0  # per spawned run; gloo's 1 GiB cells at 6 ranks take tens of seconds


@dataclasses.dataclass(frozen=True, kw_only=True)
class AllreduceSweep:
    """Which all-reduces to time.

    Attributes:
        backends: names in :data:`BACKENDS`; None: gloo, plus nccl when at least 2 GPUs are visible.
        sizes_mb: message sizes in MiB.
        world_sizes: numbers of ranks, one spawned run each per backend.
        dtype: element type, a name in :data:`DTYPE_NAMES`.
        warmup: untimed calls per size.
        iters: timed calls per size.
        timeout_s: deadline of each spawned run.
    """

    backends: tuple[str, ...] | None = None
    sizes_mb: tuple[float, ...] = (1.0, 10.0, 100.0, 1024.0)
    world_sizes: tuple[int, ...] = (2, 4, 6)
    dtype: str = "fp32"
    warmup: int = 5
    iters: int = 20
    timeout_s: float = DEFAULT_TIMEOUT_S


def bus_bandwidth(algbw: float, world_size: int) -> float:
    """nccl-tests' bus bandwidth of an all-reduce: ``algbw * 2 (n - 1) / n``."""
    return algbw * 2 * (world_size - 1) / world_size


def _elements(size_mb: float, dtype: str) -> int:
    """Elements of the all-reduced tensor of ``size_mb`` MiB (at least one)."""
    return max(1, round(size_mb * MIB / DTYPES[dtype].itemsize))


def time_allreduce(
    rank: int, world_size: int, sizes_mb: list[float], dtype: str, warmup: int, iters: int
) -> list[list[float]]:
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


def result_rows(
    backend: str, world_size: int, sizes_mb: list[float], dtype: str, per_rank: list[list[list[float]]]
) -> list[dict[str, Any]]:
    """Rows of one spawned run; ``per_rank[r][s][i]`` is rank r's i-th time (s) at size index s."""
    rows = []
    for index, size_mb in enumerate(sizes_mb):
        slowest = [max(times) for times in zip(*(rank_samples[index] for rank_samples in per_rank))]
        stats = summarize(slowest)
        nbytes = _elements(size_mb, dtype) * DTYPES[dtype].itemsize
        algbw = nbytes / stats.mean / GB
        rows.append(
            {
                "backend": backend,
                "world_size": world_size,
                "size_mb": size_mb,
                "bytes": nbytes,
                "dtype": dtype,
                "time": stats,
                "ms": stats.mean * 1e3,
                "std_ms": stats.std * 1e3,
                "median_ms": stats.median * 1e3,
                "algbw_GBps": algbw,
                "busbw_GBps": bus_bandwidth(algbw, world_size),
            }
        )
    return rows


def run_allreduce(sweep: AllreduceSweep) -> tuple[list[dict[str, Any]], list[str]]:
    """Time ``sweep`` on this node: rows (:func:`result_rows`, by backend, world size and
    message size) and a note for each (backend, world size) skipped because the machine
    lacks the GPUs or cores. Raises :class:`~benchkit.errors.BenchkitError` under a launcher
    (it starts its own ranks), for nccl without GPUs, or when nothing fits."""
    if launched_by_torchrun():
        raise BenchkitError("benchkit allreduce starts its own ranks for each world size; run it without torchrun")
    backends = list(sweep.backends or (["gloo", "nccl"] if torch.cuda.device_count() >= 2 else ["gloo"]))
    if "nccl" in backends and not torch.cuda.is_available():
        raise BenchkitError("--backend nccl needs CUDA GPUs, and none is visible on this machine")
    cells, skipped = _cells(backends, list(sweep.world_sizes))
    if not cells:
        raise BenchkitError(f"no run fits this machine: skipped {'; '.join(skipped)}")
    rows = []
    for backend, world_size in progress(cells, "benchkit allreduce"):
        per_rank = spawn(
            time_allreduce,
            world_size,
            backend=backend,
            timeout_s=sweep.timeout_s,
            args=(list(sweep.sizes_mb), sweep.dtype, sweep.warmup, sweep.iters),
        )
        rows += result_rows(backend, world_size, list(sweep.sizes_mb), sweep.dtype, per_rank)
    return rows, skipped


def plot_rows(rows: list[dict[str, Any]]) -> dict[str, Figure]:
    """Two log-log charts against message size, a line per (backend, world size):
    ``allreduce_busbw`` (bus bandwidth, GB/s) and ``allreduce_ms``."""
    from benchkit.plot import line_plot  # lazy: spawned ranks import this module and need no matplotlib

    cells = dict.fromkeys((r["backend"], r["world_size"]) for r in rows)
    by_cell = {f"{b} x {n} ranks": [r for r in rows if (r["backend"], r["world_size"]) == (b, n)] for b, n in cells}
    dtype = rows[0]["dtype"]
    figures = {}
    for column, name, ylabel in (
        ("busbw_GBps", "allreduce_busbw", "bus bandwidth (GB/s)"),
        ("ms", "allreduce_ms", "ms"),
    ):
        series = {label: ([r["size_mb"] for r in cell], [r[column] for r in cell]) for label, cell in by_cell.items()}
        figures[name] = line_plot(
            series,
            title=f"All-reduce, {dtype}: {ylabel}",
            xlabel="message size (MiB)",
            ylabel=ylabel,
            log_x=True,
            log_y=True,
        )
    return figures
