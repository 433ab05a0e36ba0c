"""FlatDDP: after backward, all gradients flattened into one buffer, one all-reduce, copied back."""

from __future__ import annotations

import torch

from ddp.base import DataParallel
from ddp.errors import sync_failed

__all__ = ["FlatDDP"]


class FlatDDP(DataParallel):
    """One all-reduce for the whole model instead of one per tensor.

    ``finish_gradient_synchronization()`` concatenates all trainable gradients
    into one flat buffer, all-reduces it, and copies the averaged values back into
    each ``.grad``. This pays the per-message latency once, at the price of two
    copies of every gradient, and still nothing overlaps with backward. A
    collective needs one dtype and device, so a model with mixed gradient dtypes
    (e.g. float32 and bfloat16) gets one buffer per (dtype, device), all-reduced
    in order of first appearance.

    Arguments:
        module: the model, on this rank's device (see :class:`ddp.DataParallel`).
        process_group: the group to average over; ``None`` is the default group.
        compress_bf16: all-reduce float32/float64 gradients as bfloat16 (default
            ``False``).

    Example::

        import torch
        from ddp import FlatDDP

        # in each rank, after torch.distributed.init_process_group("gloo")
        model = FlatDDP(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2)))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.randn(4, 8)).square().mean().backward()
        model.finish_gradient_synchronization()
        optimizer.step()
    """

    def __init__(self, module, *, process_group=None, compress_bf16=False) -> None:
        super().__init__(module, process_group=process_group, compress_bf16=compress_bf16)
        groups: dict[tuple[torch.dtype, torch.device], list[int]] = {}
        for index, param in enumerate(self._params):
            groups.setdefault((param.dtype, param.device), []).append(index)
        self._groups = list(groups.values())

    def _synchronize(self) -> None:
        for position, indices in enumerate(self._groups):
            grads = [self._grad_or_zeros(i) for i in indices]
            flat = torch.cat([g.reshape(-1) for g in grads]).to(self._wire_dtype(grads[0].dtype))
            try:
                self._all_reduce(flat)
            except RuntimeError as error:
                pending = [self._param_names[i] for later in self._groups[position:] for i in later]
                raise sync_failed(pending, error) from error
            flat = self._finish_average(flat.to(grads[0].dtype))
            for grad, piece in zip(grads, flat.split([g.numel() for g in grads])):
                grad.copy_(piece.view_as(grad))
