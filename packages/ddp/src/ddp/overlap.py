"""OverlapDDP: each gradient's all-reduce starts during backward, as soon as that gradient is ready."""

from __future__ import annotations

import torch
import torch.distributed as dist

from ddp.base import DataParallel
from ddp.ordering import InOrderLauncher

__all__ = ["OverlapDDP"]


class OverlapDDP(DataParallel):
    """Hides communication behind backward, one asynchronous all-reduce per parameter.

    A post-accumulate-grad hook on every trainable parameter starts an
    asynchronous all-reduce of its gradient as soon as backward has finished
    accumulating it, while backward keeps computing the gradients of earlier
    layers. ``finish_gradient_synchronization()`` waits for the all-reduces and
    averages. All-reduces are issued in reverse registration
    order (roughly the order backward produces gradients) and strictly in that
    order on every rank (see :mod:`ddp.ordering`), so a gradient that becomes ready
    early waits for the ones before it. Many small tensors still pay one
    message latency each; :class:`ddp.BucketedDDP` groups them.

    Gradients are all-reduced in place in ``param.grad`` (or in a bfloat16 copy
    when ``compress_bf16`` is on). Run exactly one backward pass per synchronized
    step: a second backward before ``finish_gradient_synchronization()`` would
    write into gradients that are being communicated and raises
    :class:`ddp.GradientSyncError` (accumulate earlier micro-batches inside
    ``no_sync()`` instead). After a backward pass that raised, call
    ``abandon_gradient_synchronization()`` on every rank.

    Arguments:
        module: the model, on this rank's device (see :class:`ddp.DataParallel`).
        process_group: the group to average over; ``None`` is the default group.
        compress_bf16: all-reduce float32/float64 gradients as bfloat16 (default
            ``False``).

    Example::

        import torch
        from ddp import OverlapDDP

        # in each rank, after torch.distributed.init_process_group("gloo")
        model = OverlapDDP(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2)))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.randn(4, 8)).square().mean().backward()  # all-reduces start here
        model.finish_gradient_synchronization()  # ... and are awaited here
        optimizer.step()
    """

    def __init__(self, module, *, process_group=None, compress_bf16=False) -> None:
        super().__init__(module, process_group=process_group, compress_bf16=compress_bf16)
        units = [[index] for index in reversed(range(len(self._params)))]
        self._launcher = InOrderLauncher(units, self._param_names, self._launch, self._complete)
        self._wire: dict[int, torch.Tensor] = {}  # unit -> the tensor being all-reduced

    def _before_accumulate(self, index: int) -> None:
        if self._launcher.is_ready(index):
            raise self._gradient_already_complete(index)

    def _on_grad_ready(self, index: int) -> None:
        self._launcher.mark_ready(index)

    def _synchronize(self) -> None:
        try:
            self._launcher.finish()
        finally:
            self._wire.clear()

    def _abandon(self) -> None:
        try:
            self._launcher.abandon()
        finally:
            self._wire.clear()

    def _launch(self, unit: int) -> dist.Work:
        (index,) = self._launcher.units[unit]
        wire = self._wire_tensor(self._grad_or_zeros(index))
        self._wire[unit] = wire
        return self._all_reduce(wire, async_op=True)

    def _complete(self, unit: int) -> None:
        (index,) = self._launcher.units[unit]
        self._average_into(self._params[index].grad, self._wire.pop(unit))
