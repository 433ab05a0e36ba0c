"""NaiveDDP: after backward, one blocking all-reduce per parameter gradient."""

from __future__ import annotations

from ddp.base import DataParallel
from ddp.errors import sync_failed

__all__ = ["NaiveDDP"]


class NaiveDDP(DataParallel):
    """Data parallelism in its simplest form: nothing overlaps, one message per tensor.

    ``finish_gradient_synchronization()`` all-reduces each trainable parameter's
    gradient in turn (in registration order) and waits for each before the next,
    so the whole communication time adds to the step, and a model with many small
    tensors pays the per-message latency many times. It is the baseline the other
    wrappers are measured against, and the easiest to reason about.

    Arguments:
        module: the model, on this rank's device (see :class:`ddp.DataParallel`).
        process_group: the group to average over; ``None`` is the default group.
        compress_bf16: all-reduce float32/float64 gradients as bfloat16 (default
            ``False``).

    Example::

        import torch
        from ddp import NaiveDDP

        # in each rank, after torch.distributed.init_process_group("gloo")
        model = NaiveDDP(torch.nn.Linear(8, 2))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = model(torch.randn(4, 8)).square().mean()
        loss.backward()
        model.finish_gradient_synchronization()
        optimizer.step()
    """

    def _synchronize(self) -> None:
        for index in range(len(self._params)):
            grad = self._grad_or_zeros(index)
            wire = self._wire_tensor(grad)
            try:
                self._all_reduce(wire)
            except RuntimeError as error:
                raise sync_failed(self._param_names[index:], error) from error
            self._average_into(grad, wire)
