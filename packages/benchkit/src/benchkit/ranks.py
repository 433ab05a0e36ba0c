"""Run a per-rank function on every rank, whether ``torchrun`` started this process or not.

The distributed benchmarks (``benchkit ddp``, ``benchkit zero``) start both ways:

- under ``torchrun`` (:func:`launched_by_torchrun`), the processes already
  exist: this one joins the process group and runs its own rank;
- otherwise this process spawns ``nproc`` ranks on this node through
  :func:`ddp.launch.spawn`, NCCL with one GPU per rank on CUDA, gloo on CPU.

Either way :func:`run_on_ranks` hands every rank's return value to one place:
the spawning process, or rank 0 under ``torchrun``.

Example::

    from benchkit.ranks import run_on_ranks


    def measure(rank, world_size, steps):
        return {"rank": rank, "steps": steps}


    results = run_on_ranks(measure, nproc=2, device_type="cpu", timeout_s=60, args=(10,))
    if results is not None:  # None on the ranks other than 0 under torchrun
        print(results[0])

Both also share what every rank needs to know (:class:`RankPlan`) and a rank's
device (:func:`rank_device`); their options are :func:`benchkit.options.add_rank_arguments`.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from benchkit.errors import BenchkitError
from benchkit.model import SIZES
from ddp.launch import spawn

__all__ = [
    "GPU_SIZES",
    "RankPlan",
    "backend_for",
    "launched_by_torchrun",
    "rank_device",
    "rank_device_type",
    "rank_runs",
    "run_on_ranks",
]

# The sizes measured on GPUs when none are named (a CPU gets "tiny": benchkit.options.default_sizes).
GPU_SIZES = ("small", "xl")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RankPlan:
    """What every rank of a distributed benchmark measures; plain values, so that it can be
    sent to spawned ranks. The benchmarks add their own fields (:mod:`benchkit.data_parallel`,
    :mod:`benchkit.zero`).

    Attributes:
        sizes: model sizes, keys of :data:`benchkit.model.SIZES`, measured in this order.
        context_length: tokens per sequence.
        batch_size: sequences per rank and step, each rank its own.
        warmup: untimed steps first.
        steps: timed steps.
        device_type: ``"cuda"`` (NCCL, one GPU per rank) or ``"cpu"`` (gloo).
    """

    sizes: tuple[str, ...]
    context_length: int
    batch_size: int
    warmup: int
    steps: int
    device_type: str

    def __post_init__(self) -> None:
        unknown = [size for size in self.sizes if size not in SIZES]
        if not self.sizes or unknown:
            raise ValueError(f"sizes must be a non-empty sequence of {tuple(SIZES)}, got {self.sizes!r}")
        if self.device_type not in ("cpu", "cuda"):
            raise ValueError(f"device_type must be 'cpu' or 'cuda', got {self.device_type!r}")


def rank_device_type(device: torch.device) -> str:
    """The ``device_type`` of ranks asked for with ``--device`` resolved to ``device``: one GPU per
    rank on CUDA, so ``cuda:N`` (one GPU named) is refused with a :class:`~benchkit.errors.BenchkitError`."""
    if device.index is not None:
        raise BenchkitError(
            f"--device {device} names one GPU, but the ranks take one GPU each: "
            f"use --device cuda (and --nproc), or CUDA_VISIBLE_DEVICES to choose the GPUs"
        )
    return device.type


def backend_for(device_type: str) -> str:
    """The process group backend for ranks on ``device_type``: NCCL on CUDA, gloo on the CPU."""
    return "nccl" if device_type == "cuda" else "gloo"


def rank_device(device_type: str) -> torch.device:
    """Inside a function run by :func:`run_on_ranks`: this rank's device, the GPU that
    was selected for it on CUDA (``LOCAL_RANK`` under torchrun, the rank when spawned), else the CPU."""
    return torch.device("cuda", torch.cuda.current_device()) if device_type == "cuda" else torch.device("cpu")


def rank_runs(nproc: Sequence[int]) -> list[int]:
    """The runs a distributed benchmark makes for its ``--nproc`` values: one per value; under
    ``torchrun``, one run on torchrun's processes (``WORLD_SIZE`` of them) whatever was asked."""
    return [int(os.environ["WORLD_SIZE"])] if launched_by_torchrun() else list(nproc)


def launched_by_torchrun() -> bool:
    """True when a launcher such as ``torchrun`` started this process as one rank of a group
    (``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` are set; :func:`ddp.launch.spawn` sets them too)."""
    return all(name in os.environ for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))


def run_on_ranks(
    fn: Callable[..., Any],
    *,
    nproc: int,
    device_type: str,
    timeout_s: float,
    args: Sequence[Any] = (),
) -> list[Any] | None:
    """Run ``fn(rank, world_size, *args)`` on every rank, inside an initialized process group.

    Under ``torchrun`` this process runs its own rank: on CUDA it first selects
    the GPU ``LOCAL_RANK``; it initializes the process group unless one exists
    (NCCL on CUDA, gloo on CPU; collective timeout ``timeout_s``), gathers the
    ranks' return values onto rank 0 and destroys only a group it created.
    ``nproc`` is ignored. Otherwise it spawns ``nproc`` ranks with
    :func:`ddp.launch.spawn` (whose deadline is ``timeout_s``).

    Arguments:
        fn: a module-level (picklable) function; its return value must be picklable.
        nproc: number of ranks to spawn when not under ``torchrun``.
        device_type: ``"cuda"`` (NCCL, one GPU per rank) or ``"cpu"`` (gloo).
        timeout_s: the spawned run's deadline, and the process group timeout.
        args: extra positional arguments passed to every rank.

    Returns:
        Every rank's return value, indexed by rank: in the spawning process, or
        on rank 0 under ``torchrun``. ``None`` on the other ranks under ``torchrun``.

    Raises:
        BenchkitError: on CUDA, ``nproc`` exceeds the visible GPUs (when spawning).
        ddp.launch.DistributedRunError: a spawned rank failed or missed the deadline.
    """
    backend = backend_for(device_type)
    if not launched_by_torchrun():
        if device_type == "cuda" and nproc > torch.cuda.device_count():
            raise BenchkitError(
                f"--nproc {nproc} needs {nproc} GPUs (one per rank), but {torch.cuda.device_count()} are visible"
            )
        return spawn(fn, nproc, args=args, backend=backend, timeout_s=timeout_s)

    if device_type == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    created = not dist.is_initialized()
    if created:
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    try:
        rank, world_size = dist.get_rank(), dist.get_world_size()
        mine = fn(rank, world_size, *args)
        everyone = [None] * world_size if rank == 0 else None
        dist.gather_object(mine, everyone, dst=0)
        return everyone
    finally:
        if created:
            dist.destroy_process_group()
