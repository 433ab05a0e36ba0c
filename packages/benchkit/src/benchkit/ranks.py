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

Both commands also share their options that mean the same (:func:`add_rank_arguments`),
the sizes measured when ``--size`` is not given (:func:`default_rank_sizes`) and a
rank's device (:func:`rank_device`).
"""

from __future__ import annotations

import argparse
import datetime
import os
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist
from ddp.launch import spawn

from benchkit.argtypes import positive_float, positive_int
from benchkit.errors import BenchkitError
from benchkit.model import SIZES

__all__ = [
    "add_rank_arguments",
    "backend_for",
    "default_rank_sizes",
    "launched_by_torchrun",
    "rank_device",
    "run_on_ranks",
]


def add_rank_arguments(parser: argparse.ArgumentParser, *, context_length: int, timeout_s: float) -> None:
    """The options of the distributed benchmarks that mean the same in each: ``--size``,
    ``--context-length`` (default ``context_length``), ``--batch-size`` (per rank),
    ``--device`` (auto, cpu or cuda) and ``--timeout-s`` (default ``timeout_s``, see :func:`run_on_ranks`)."""
    parser.add_argument("--size", choices=list(SIZES), nargs="+", default=None,
                        help="model sizes (default: tiny on CPU; small and xl on GPUs)")
    parser.add_argument("--context-length", type=positive_int, default=context_length, metavar="T",
                        help=f"tokens per sequence (default: {context_length})")
    parser.add_argument("--batch-size", type=positive_int, default=4, metavar="B",
                        help="sequences per rank and step, each rank its own (default: 4)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="cuda: NCCL, one GPU per rank; cpu: gloo; auto (default): cuda if a GPU is visible")
    parser.add_argument("--timeout-s", type=positive_float, default=timeout_s, metavar="S",
                        help=f"deadline of each spawned group of ranks, and the process group timeout "
                             f"(default: {timeout_s:g})")


def default_rank_sizes(device: torch.device) -> list[str]:
    """The sizes measured when ``--size`` is not given: tiny on a CPU, small and xl on GPUs."""
    return ["tiny"] if device.type == "cpu" else ["small", "xl"]


def backend_for(device_type: str) -> str:
    """The process group backend for ranks on ``device_type``: NCCL on CUDA, gloo on the CPU."""
    return "nccl" if device_type == "cuda" else "gloo"


def rank_device(device_type: str) -> torch.device:
    """Inside a function run by :func:`run_on_ranks`: this rank's device, the GPU that
    was selected for it on CUDA (``LOCAL_RANK`` under torchrun, the rank when spawned), else the CPU."""
    return torch.device("cuda", torch.cuda.current_device()) if device_type == "cuda" else torch.device("cpu")


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
            raise BenchkitError(f"--nproc {nproc} needs {nproc} GPUs (one per rank), "
                                f"but {torch.cuda.device_count()} are visible")
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
