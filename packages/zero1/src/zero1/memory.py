"""The memory model of ZeRO stage 1: what each rank holds, predicted from the parameter sizes.

With ``P`` parameter elements over ``N`` ranks, data parallelism with ZeRO-1
keeps on every rank (Rajbhandari et al., "ZeRO: Memory Optimizations Toward
Training Trillion Parameter Models", SC 2020, section 5.1)::

    bytes per rank = P * param_bytes              (the full model)
                   + P * grad_bytes               (full gradients, all-reduced)
                   + S_r * state_bytes_per_element (optimizer state, this rank's share)

where ``S_r`` is the number of elements rank ``r`` owns. The partition of
:func:`zero1.partition_parameters` keeps ``S_r <= P / N + largest`` (the
largest single parameter). AdamW keeps two state tensors shaped like each
parameter (``exp_avg``, ``exp_avg_sq``), so ``state_bytes_per_element`` is
``2 * 4 = 8`` for fp32 parameters; SGD with momentum keeps one. Activations and
temporary buffers come on top and are not modelled here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from zero1.partition import partition_parameters

__all__ = ["MemoryPrediction", "predict_memory"]


@dataclass(frozen=True)
class MemoryPrediction:
    """Predicted bytes per rank; see :func:`predict_memory`.

    Attributes:
        param_bytes: the full model's parameters (every rank).
        grad_bytes: the full gradients (every rank).
        state_bytes: optimizer state of each rank under the partition, indexed by rank.
        state_bound_bytes: the partition's guarantee, ``(P / N + largest) * state_bytes_per_element``.
        unsharded_state_bytes: optimizer state without sharding (every rank).
    """

    param_bytes: int
    grad_bytes: int
    state_bytes: tuple[int, ...]
    state_bound_bytes: float
    unsharded_state_bytes: int

    def total_bytes(self, rank: int) -> int:
        """Parameters + gradients + rank ``rank``'s optimizer state, in bytes."""
        return self.param_bytes + self.grad_bytes + self.state_bytes[rank]

    @property
    def unsharded_total_bytes(self) -> int:
        """Parameters + gradients + the whole optimizer state (plain data parallelism), in bytes."""
        return self.param_bytes + self.grad_bytes + self.unsharded_state_bytes


def predict_memory(
    param_sizes: Sequence[int],
    world_size: int,
    *,
    param_bytes: int = 4,
    grad_bytes: int = 4,
    state_bytes_per_element: int = 8,
) -> MemoryPrediction:
    """Predict per-rank memory of data parallelism + ZeRO-1 from parameter element counts.

    Arguments:
        param_sizes: element count of each parameter, in optimizer order.
        world_size: number of ranks sharing the optimizer state, >= 1.
        param_bytes: bytes per parameter element (4 for fp32).
        grad_bytes: bytes per gradient element (4 for fp32).
        state_bytes_per_element: optimizer-state bytes per parameter element
            (8 for AdamW on fp32 parameters, 4 for SGD with momentum).

    Example::

        >>> p = predict_memory([1000, 500, 500], world_size=2)
        >>> p.state_bytes, p.unsharded_state_bytes
        ((8000, 8000), 16000)
    """
    owners = partition_parameters(list(param_sizes), world_size)
    total = sum(param_sizes)
    owned = [0] * world_size
    for size, owner in zip(param_sizes, owners):
        owned[owner] += size
    return MemoryPrediction(
        param_bytes=total * param_bytes,
        grad_bytes=total * grad_bytes,
        state_bytes=tuple(n * state_bytes_per_element for n in owned),
        state_bound_bytes=(total / world_size + max(param_sizes, default=0)) * state_bytes_per_element,
        unsharded_state_bytes=total * state_bytes_per_element,
    )
