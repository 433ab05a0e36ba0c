"""After each rank has updated the parameters it owns, copy them to every other rank.

Two modes, so that their cost can be compared (``benchkit zero``):

- ``"bucketed"``: for each owner rank, its parameters of one device and dtype are
  packed, in order, into flat buckets of at most ``bucket_bytes``, and each bucket
  is broadcast from the owner once. A parameter larger than the cap, or alone in
  its bucket, is broadcast in place with no copy.
- ``"per_parameter"``: one in-place broadcast per parameter, all launched
  asynchronously and then awaited.

Every rank builds the same plan from the same partition, so the broadcasts are
issued in the same order everywhere.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

__all__ = ["BROADCAST_MODES", "ParameterBroadcaster"]

BROADCAST_MODES = ("bucketed", "per_parameter")

# Packed buckets whose broadcast may be in flight at once. Two lets the packing or
# unpacking of one bucket overlap the transfer of the next while bounding the
# extra memory to two buckets (a full-model staging buffer would cost as much
# memory as the parameters themselves).
_PACKED_BUCKETS_IN_FLIGHT = 2


@dataclass(frozen=True)
class _Bucket:
    owner: int  # rank within the process group that holds the updated values
    params: tuple[torch.Tensor, ...]

    @property
    def in_place(self) -> bool:
        return len(self.params) == 1 and self.params[0].is_contiguous()


class ParameterBroadcaster:
    """Broadcasts every parameter from its owner rank to all ranks of ``group``.

    Arguments:
        params: all parameters, in one fixed order that is the same on every rank.
        owners: ``owners[i]`` is the rank (within ``group``) that owns ``params[i]``.
        rank: this process's rank within ``group``.
        group: the process group (``None``: the default group).
        mode: ``"bucketed"`` or ``"per_parameter"``.
        bucket_bytes: bucket size cap in bytes for ``"bucketed"``; ``None`` means
            one bucket per (owner, device, dtype).
    """

    def __init__(
        self,
        params: Sequence[torch.Tensor],
        owners: Sequence[int],
        rank: int,
        group: dist.ProcessGroup | None,
        mode: str,
        bucket_bytes: int | None,
    ) -> None:
        if mode not in BROADCAST_MODES:
            raise ValueError(f"mode must be one of {BROADCAST_MODES}, got {mode!r}")
        self._rank = rank
        self._group = group
        self.buckets: list[_Bucket] = []
        cap = 0 if mode == "per_parameter" else bucket_bytes
        for owner in sorted(set(owners)):
            by_kind: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
            for param, param_owner in zip(params, owners, strict=True):
                if param_owner == owner:
                    by_kind.setdefault((param.device, param.dtype), []).append(param)
            for same_kind in by_kind.values():
                self.buckets.extend(_Bucket(owner, chunk) for chunk in _chunks(same_kind, cap))

    @torch.no_grad()
    def broadcast(self) -> None:
        """Copy the owners' current values into every rank's parameters (collective)."""
        pending: deque[tuple[_Bucket, torch.Tensor | None, dist.Work]] = deque()
        packed_in_flight = 0  # entries of pending with a buffer
        for bucket in self.buckets:
            if bucket.in_place:
                buffer = None
                tensor = bucket.params[0].detach()
            else:
                buffer = self._packed(bucket)
                tensor = buffer
                packed_in_flight += 1
            work = dist.broadcast(tensor, group=self._group, group_src=bucket.owner, async_op=True)
            pending.append((bucket, buffer, work))
            while packed_in_flight > _PACKED_BUCKETS_IN_FLIGHT:
                oldest = pending.popleft()
                packed_in_flight -= oldest[1] is not None
                self._finish(*oldest)
        while pending:
            self._finish(*pending.popleft())

    def _packed(self, bucket: _Bucket) -> torch.Tensor:
        if bucket.owner == self._rank:
            return torch.cat([p.detach().reshape(-1) for p in bucket.params])
        first = bucket.params[0]
        numel = sum(p.numel() for p in bucket.params)
        return torch.empty(numel, dtype=first.dtype, device=first.device)

    def _finish(self, bucket: _Bucket, buffer: torch.Tensor | None, work: dist.Work) -> None:
        work.wait()
        if buffer is None or bucket.owner == self._rank:
            return
        offset = 0
        for param in bucket.params:
            param.detach().copy_(buffer[offset : offset + param.numel()].view(param.shape))
            offset += param.numel()


def _chunks(params: list[torch.Tensor], cap_bytes: int | None) -> list[tuple[torch.Tensor, ...]]:
    """Split ``params`` in order into runs of at most ``cap_bytes`` (a larger tensor runs alone)."""
    chunks: list[list[torch.Tensor]] = []
    size = 0
    for param in params:
        nbytes = param.numel() * param.element_size()
        if not chunks or (cap_bytes is not None and size + nbytes > cap_bytes):
            chunks.append([])
            size = 0
        chunks[-1].append(param)
        size += nbytes
    return [tuple(chunk) for chunk in chunks]
