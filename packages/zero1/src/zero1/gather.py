"""Collect one picklable object from every rank onto one rank, or a few integers from every rank onto all.

``torch.distributed.gather_object`` would do, but it decodes the received bytes
through NumPy (``tensor.numpy()``), and this package depends on torch only. Here
each rank serializes its object with :func:`torch.save`, the byte counts are
all-gathered, every rank's bytes are padded to the longest and gathered with
:func:`torch.distributed.gather`, and the destination reads them back through
:func:`torch.frombuffer` views of plain ``bytearray`` buffers.
"""

from __future__ import annotations

import io
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["all_gather_ints", "collective_device", "gather_objects"]


def _to_tensor(data: bytes, length: int, device: torch.device) -> torch.Tensor:
    padded = bytearray(length)
    padded[: len(data)] = data
    return torch.frombuffer(padded, dtype=torch.uint8).to(device)


def _to_bytes(tensor: torch.Tensor, length: int) -> bytes:
    out = bytearray(length)
    torch.frombuffer(out, dtype=torch.uint8).copy_(tensor[:length])
    return bytes(out)


def collective_device(group: dist.ProcessGroup | None = None) -> torch.device:
    """Where tensors of a collective over ``group`` must live: NCCL moves only the current CUDA device's."""
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_gather_ints(values: list[int], group: dist.ProcessGroup | None = None) -> list[list[int]]:
    """Every rank's ``values`` (the same number of 64-bit integers on each), indexed by rank (a collective)."""
    mine = torch.tensor(values, dtype=torch.int64, device=collective_device(group))
    everyone = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
    dist.all_gather(everyone, mine, group=group)
    return [row.tolist() for row in everyone]


def gather_objects(obj: Any, to: int, group: dist.ProcessGroup | None = None) -> list[Any] | None:
    """Gather ``obj`` of every rank of ``group`` onto group rank ``to`` (a collective).

    Returns the objects indexed by rank on rank ``to``, ``None`` elsewhere. Tensors
    inside ``obj`` should be on the CPU (they are unpickled onto the device they
    were saved from). On NCCL the bytes travel through the current CUDA device.
    """
    device = collective_device(group)
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    data = buffer.getvalue()
    world_size, rank = dist.get_world_size(group), dist.get_rank(group)

    lengths = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(world_size)]
    dist.all_gather(lengths, torch.tensor([len(data)], dtype=torch.int64, device=device), group=group)
    lengths = [int(n.item()) for n in lengths]
    longest = max(lengths)

    mine = _to_tensor(data, longest, device)
    received = [torch.empty_like(mine) for _ in range(world_size)] if rank == to else None
    dist.gather(mine, received, group=group, group_dst=to)
    if rank != to:
        return None
    # The bytes come from this job's own ranks (as with gather_object's pickle).
    return [
        torch.load(io.BytesIO(_to_bytes(tensor.cpu(), n)), weights_only=False) for tensor, n in zip(received, lengths)
    ]
