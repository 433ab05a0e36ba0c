"""One training step: a model, its batch, a precision, an optimizer and an optional wrapper.

Every benchkit measurement that trains (``model``, ``profile``, ``memory``,
``precision``, ``ddp``, ``zero`` and the parallel check of ``run``) runs its steps
through one :class:`Trainer`. A step has up to four phases, each timed on its own
by a :class:`~benchkit.timing.PhaseTimer` if one is given:

- ``forward``: the forward pass and the loss (:func:`benchkit.model.lm_loss`);
- ``backward``: backward of the loss, scaled by the precision's
  :class:`torch.amp.GradScaler` (enabled for fp16 only);
- ``sync``: a data-parallel wrapper's ``finish_gradient_synchronization()``,
  for wrappers that have one (the :mod:`ddp` wrappers; PyTorch's DDP all-reduces
  inside backward);
- ``optimizer``: the optimizer step, through the scaler.

Modes (:data:`MODES`) run the first phases only: ``forward`` under
:func:`torch.no_grad` (inference: no activations are kept), ``forward-backward``,
``train-step``. Precisions (:data:`PRECISIONS`): ``fp32`` (no autocast: the
computation runs in the parameters' dtype), ``bf16`` autocast, ``fp16`` autocast
with loss scaling (Micikevicius et al. 2018, "Mixed Precision Training").

AdamW options (:func:`adamw_options`): PyTorch's fused implementation on CUDA,
its default on a CPU; every optimizer of a comparison gets the same ones.

Example::

    import torch
    from benchkit.model import TransformerLM, model_config, random_batch
    from benchkit.timing import PhaseTimer
    from benchkit.training import Trainer, adamw_options, measure

    config = model_config("tiny", 64)
    model = TransformerLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), **adamw_options(model.parameters()))
    trainer = Trainer(model, optimizer, [random_batch(config, 4)], precision="bf16")
    stats = measure(trainer, "train-step", warmup=1, steps=3)
    print(stats["step"].mean, "seconds per training step")
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
from torch import nn

from benchkit.model import lm_loss
from benchkit.timing import PhaseTimer, Stats, summarize

__all__ = ["MODES", "PHASES", "PRECISIONS", "Trainer", "adamw_options", "measure", "timed_steps"]

MODES = ("forward", "forward-backward", "train-step")
PHASES = {
    "forward": ("forward",),
    "forward-backward": ("forward", "backward"),
    "train-step": ("forward", "backward", "optimizer"),
}
PRECISIONS = ("fp32", "bf16", "fp16")
_AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}

# AdamW's learning rate. Timing and memory do not depend on it; a small value keeps
# a long benchmark run numerically quiet.
LEARNING_RATE = 1e-4


def adamw_options(params: Iterable[torch.Tensor], lr: float = LEARNING_RATE) -> dict[str, Any]:
    """Keyword arguments of :class:`torch.optim.AdamW` for ``params``: ``lr``, and
    ``fused=True`` when every parameter is a floating-point CUDA tensor.

    PyTorch's optimizer docs (``torch.optim``, the ``fused`` flag): "fused being
    theoretically fastest with both vertical and horizontal fusion". Left unset,
    AdamW on CUDA runs the ``foreach`` implementation, a chain of multi-tensor
    kernels (the CHANGELOG has what that cost on an H100). On a CPU, or for
    parameters that are not all floating-point CUDA tensors, the options stay
    PyTorch's defaults. Give every optimizer of one comparison the same options
    (plain AdamW, ``zero1.ShardedOptimizer`` and ``ZeroRedundancyOptimizer``, which
    both pass them on to the optimizer class), so that the variants differ only in
    what is being compared.

    Arguments:
        params: the parameters the optimizer will update (a list: it is iterated once here).
        lr: the learning rate.
    """
    params = list(params)
    fused = bool(params) and all(p.is_cuda and p.is_floating_point() for p in params)
    return {"lr": lr, "fused": True} if fused else {"lr": lr}


class Trainer:
    """Runs training steps of ``model`` on fixed ``batches``, phase by phase (see the module docstring).

    Arguments:
        model: the model being trained.
        optimizer: the optimizer over its parameters (or over the wrapper's).
        batches: micro-batches ``(inputs, targets)``, int64 (B, T) each, on the model's
            device. A step accumulates the gradient of the mean loss over all of them
            (each micro-batch's loss divided by their number; the forward passes of all
            micro-batches, then their backward passes); usually there is one.
        precision: ``"fp32"``, ``"bf16"`` or ``"fp16"`` (:data:`PRECISIONS`).
        wrapper: a module that wraps ``model`` and is called instead of it: a
            data-parallel wrapper, or :func:`torch.compile`'s module. Its
            ``finish_gradient_synchronization()``, if it has one, is the ``sync`` phase.
        set_to_none: how each step resets the gradients (``optimizer.zero_grad``):
            ``False`` zeroes them in place, which :class:`ddp.BucketedDDP` needs to
            keep each ``.grad`` a view into its buckets.

    Attributes: ``model``, ``optimizer``, ``batches``, ``precision``, ``device`` (of
    the first batch), ``scaler`` (the :class:`torch.amp.GradScaler`) and ``forward_module``
    (``wrapper``, else ``model``).
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        batches: Sequence[tuple[torch.Tensor, torch.Tensor]],
        *,
        precision: str = "fp32",
        wrapper: nn.Module | None = None,
        set_to_none: bool = True,
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        if not batches:
            raise ValueError("batches must hold at least one (inputs, targets) pair")
        self.model = model
        self.optimizer = optimizer
        self.batches = list(batches)
        self.precision = precision
        self.device = self.batches[0][0].device
        self.forward_module = wrapper if wrapper is not None else model
        self._sync: Callable[[], None] | None = getattr(wrapper, "finish_gradient_synchronization", None)
        self._set_to_none = set_to_none
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=precision == "fp16")

    def autocast(self) -> contextlib.AbstractContextManager:
        """The autocast context of this precision (a no-op for fp32)."""
        if self.precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=_AUTOCAST_DTYPES[self.precision])

    @contextlib.contextmanager
    def _phase(
        self, timer: PhaseTimer | None, name: str, annotate: bool, after_phase: Callable[[str], None] | None
    ) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            if annotate:
                stack.enter_context(torch.profiler.record_function(name))
                if self.device.type == "cuda":
                    stack.enter_context(torch.cuda.nvtx.range(name))
            if timer is not None:
                stack.enter_context(timer.phase(name))
            yield
        if after_phase is not None:
            after_phase(name)

    def step(
        self,
        mode: str = "train-step",
        timer: PhaseTimer | None = None,
        *,
        annotate: bool = False,
        after_phase: Callable[[str], None] | None = None,
    ) -> float:
        """Run one step of ``mode``; return the loss (the mean over the micro-batches).

        Arguments:
            mode: one of :data:`MODES`.
            timer: receives one sample per phase (seconds), if given.
            annotate: also make each phase a :func:`torch.profiler.record_function`
                range and, on CUDA, an NVTX range (visible in Nsight Systems).
            after_phase: called with each phase's name when it has ended, outside
                its timing (to read the allocator between phases, say).
        """
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.optimizer.zero_grad(set_to_none=self._set_to_none)
        count = len(self.batches)
        with (
            self._phase(timer, "forward", annotate, after_phase),
            torch.set_grad_enabled(mode != "forward"),
            self.autocast(),
        ):
            losses = [lm_loss(self.forward_module(inputs), targets) for inputs, targets in self.batches]
        if mode != "forward":
            with self._phase(timer, "backward", annotate, after_phase):
                for loss in losses:
                    self.scaler.scale(loss / count if count > 1 else loss).backward()
            if self._sync is not None:
                with self._phase(timer, "sync", annotate, after_phase):
                    self._sync()
        if mode == "train-step":
            with self._phase(timer, "optimizer", annotate, after_phase):
                self.scaler.step(self.optimizer)
                self.scaler.update()
        return sum(loss.item() for loss in losses) / count


def timed_steps(
    trainer: Trainer,
    mode: str,
    *,
    warmup: int,
    steps: int,
    timer: PhaseTimer | None = None,
    after_phase: Callable[[str], None] | None = None,
) -> PhaseTimer:
    """Run ``warmup`` untimed steps, then ``steps`` timed ones; return the timer, holding
    the timed steps' samples only (``timer``, cleared after the warm-up, or a new one)."""
    if warmup < 0 or steps < 1:
        raise ValueError(f"warmup must be >= 0 and steps >= 1, got warmup={warmup}, steps={steps}")
    timer = timer or PhaseTimer(trainer.device)
    for _ in range(warmup):
        trainer.step(mode, timer, after_phase=after_phase)
    timer.clear()
    for _ in range(steps):
        trainer.step(mode, timer, after_phase=after_phase)
    return timer


def measure(
    trainer: Trainer,
    mode: str,
    *,
    warmup: int,
    steps: int,
    timer: PhaseTimer | None = None,
) -> dict[str, Stats]:
    """:func:`timed_steps`, summarized: :class:`~benchkit.timing.Stats` (seconds) per phase
    of ``mode`` and for ``"step"``, the sum of the phases of each step."""
    timer = timed_steps(trainer, mode, warmup=warmup, steps=steps, timer=timer)
    return {**timer.summary(), "step": summarize(timer.step_totals())}
