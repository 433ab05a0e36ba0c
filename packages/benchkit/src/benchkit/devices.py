"""The device a measurement runs on: the ``--device`` value resolved, named, and cleaned up after.

Example::

    from benchkit.devices import device_name, free_memory, resolve_device

    device = resolve_device("auto")  # cuda if a GPU is visible, else cpu
    print(device_name())  # e.g. "NVIDIA H100 80GB HBM3" or "CPU (x86_64, 2 threads)"
    free_memory(device)  # between two workloads
"""

from __future__ import annotations

import gc
import platform

import torch

from benchkit.errors import BenchkitError

__all__ = ["allocated_bytes", "device_name", "free_memory", "resolve_device"]


def resolve_device(name: str) -> torch.device:
    """The device of ``--device`` ``name``: ``"auto"`` is CUDA if a GPU is visible,
    else the CPU. ``"cuda"`` on a machine without a GPU, or ``"cuda:N"`` with N not
    below the number of visible GPUs, raises :class:`~benchkit.errors.BenchkitError`.

    ``"cuda:N"`` also becomes the current CUDA device (:func:`torch.cuda.set_device`),
    since some work goes to the current device whatever tensors it is given: the
    CUDA events of :class:`~benchkit.timing.PhaseTimer` are recorded on its stream,
    and :func:`device_name` names it."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise BenchkitError(f"--device must be auto, cpu, cuda or cuda:N, got {name!r}") from error
    if device.type not in ("cpu", "cuda"):
        raise BenchkitError(f"--device must be auto, cpu, cuda or cuda:N, got {name!r}")
    if device.type == "cpu":
        return device
    if not torch.cuda.is_available():
        raise BenchkitError(f"--device {name} was requested but no CUDA GPU is visible on this machine")
    if device.index is not None:
        count = torch.cuda.device_count()
        if device.index >= count:
            visible = "cuda:0 is" if count == 1 else f"cuda:0 to cuda:{count - 1} are"
            raise BenchkitError(f"--device {name} was requested but only {visible} visible on this machine")
        torch.cuda.set_device(device)
    return device


def device_name() -> str:
    """This machine's device as tables and the environment record name it: the current CUDA GPU,
    else the CPU and its threads."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def free_memory(device: torch.device) -> None:
    """Collect garbage and return cached CUDA blocks, so the next workload starts clean."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def allocated_bytes(device: torch.device) -> int | None:
    """Bytes the CUDA caching allocator holds for tensors on ``device``; None on a CPU (no allocator to read)."""
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else None
