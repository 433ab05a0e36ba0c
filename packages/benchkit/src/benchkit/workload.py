"""One training workload of the reference model, run step by step in timed phases.

The ``model``, ``profile``, ``memory`` and ``run`` subcommands all measure the
same thing: the reference :class:`~benchkit.model.TransformerLM` with AdamW on
a random batch, in one of three modes:

- ``forward``: the forward pass and the loss, under :func:`torch.no_grad`
  (inference: no activations are kept for a backward pass);
- ``forward-backward``: forward, then backward (gradients are reset, untimed,
  before each step);
- ``train-step``: forward, backward, then the optimizer step.

and one of three precisions: ``fp32``; ``bf16`` (float32 parameters, bfloat16
autocast); ``fp16`` (float16 autocast, with a :class:`torch.amp.GradScaler`
scaling the loss, Micikevicius et al. 2018, "Mixed Precision Training").

AdamW (:func:`adamw_options`) runs PyTorch's fused implementation on CUDA
(``fused=True``: one kernel per group of tensors instead of a chain of
``_foreach`` kernels) and the default one on a CPU.

Example::

    from benchkit.model import model_config
    from benchkit.timing import PhaseTimer
    from benchkit.workload import Workload, measure

    workload = Workload(model_config("tiny", 64), batch_size=4, device="cpu", precision="bf16")
    stats = measure(workload, "train-step", warmup=1, steps=3)
    print(stats["step"].mean, "seconds per training step")
"""

from __future__ import annotations

import argparse
import contextlib
import gc
from typing import Any, Iterable, Iterator

import torch

from benchkit.argtypes import positive_int
from benchkit.errors import BenchkitError
from benchkit.model import ATTENTION_BACKENDS, SIZES, ModelConfig, TransformerLM, lm_loss, random_batch
from benchkit.timing import PhaseTimer, Stats, summarize

__all__ = [
    "MODES",
    "PHASES",
    "PRECISIONS",
    "Workload",
    "add_device_argument",
    "add_workload_arguments",
    "adamw_options",
    "default_sizes",
    "free_memory",
    "measure",
    "resolve_device",
]

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
    kernels that took 63.6 ms of a 160.1 ms xl bf16 train step on an H100
    (``results/2026-11-22/h100-pass2-ee8404d.md``). On a CPU, or for parameters
    that are not all floating-point CUDA tensors, the options stay PyTorch's
    defaults. Give every optimizer of one comparison the same options (plain
    AdamW, ``zero1.ShardedOptimizer`` and ``ZeroRedundancyOptimizer``, which both
    pass them on to the optimizer class), so that the variants differ only in
    what is being compared.

    Arguments:
        params: the parameters the optimizer will update (a list: it is iterated once here).
        lr: the learning rate.
    """
    params = list(params)
    fused = bool(params) and all(p.is_cuda and p.is_floating_point() for p in params)
    return {"lr": lr, "fused": True} if fused else {"lr": lr}


def resolve_device(name: str) -> torch.device:
    """The device of ``--device`` ``name``: ``"auto"`` is CUDA if a GPU is visible,
    else the CPU. ``"cuda"`` on a machine without a GPU, or ``"cuda:N"`` with N not
    below the number of visible GPUs, raises :class:`~benchkit.errors.BenchkitError`.

    ``"cuda:N"`` also becomes the current CUDA device (:func:`torch.cuda.set_device`),
    since some work goes to the current device whatever tensors it is given: the
    CUDA events of :class:`~benchkit.timing.PhaseTimer` are recorded on its stream,
    and :func:`benchkit.report.device_name` names it."""
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


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    """``--device``: auto (default), cpu, cuda or cuda:N, for :func:`resolve_device`."""
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")


def add_workload_arguments(parser: argparse.ArgumentParser, *, sweep: bool) -> None:
    """The options that pick a workload: ``--size``, ``--context-length``,
    ``--batch-size``, ``--precision``, ``--attention``, ``--compile``, ``--device``.
    With ``sweep``, ``--size``, ``--context-length`` and ``--precision`` take several values."""
    many = {"nargs": "+"} if sweep else {}
    parser.add_argument(
        "--size", choices=list(SIZES), default=None, **many,
        help="named model size (default: tiny on CPU, small on GPU)",
    )
    parser.add_argument(
        "--context-length", type=positive_int, default=[256] if sweep else 256, metavar="T", **many,
        help="tokens per sequence (default: 256)",
    )
    parser.add_argument("--batch-size", type=positive_int, default=4, metavar="B", help="sequences per step (default: 4)")
    parser.add_argument(
        "--precision", choices=PRECISIONS, default=["fp32"] if sweep else "fp32", **many,
        help="fp32, bf16 autocast, or fp16 autocast with loss scaling (default: fp32)",
    )
    parser.add_argument("--attention", choices=ATTENTION_BACKENDS, default="sdpa", help="attention backend (default: sdpa)")
    parser.add_argument("--compile", action="store_true", help="run the model through torch.compile")
    add_device_argument(parser)


def default_sizes(device: torch.device) -> list[str]:
    """The sizes measured when ``--size`` is not given: tiny on a CPU, small on a GPU."""
    return ["tiny"] if device.type == "cpu" else ["small"]


class Workload:
    """A model, its AdamW optimizer and one random batch, placed on a device.

    The optimizer is ``torch.optim.AdamW`` with :func:`adamw_options` (fused on CUDA).

    Arguments:
        config: the model's shape and attention backend.
        batch_size: sequences per step; each has ``config.context_length`` tokens.
        device: where everything lives.
        precision: ``"fp32"``, ``"bf16"`` or ``"fp16"`` (see the module docstring).
        compile: wrap the model in :func:`torch.compile` (the first steps compile).
        seed: seeds the parameters and the batch.
    """

    def __init__(
        self,
        config: ModelConfig,
        *,
        batch_size: int,
        device: torch.device | str,
        precision: str = "fp32",
        compile: bool = False,
        seed: int = 0,
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        self.config = config
        self.batch_size = batch_size
        self.device = torch.device(device)
        self.precision = precision
        generator = torch.Generator().manual_seed(seed)
        # Built directly on the device: initializing a 2.7B-parameter model on the CPU
        # first would take longer than measuring it.
        with torch.random.fork_rng(devices=[]), self.device:
            torch.manual_seed(seed)
            self.model = TransformerLM(config)
        params = list(self.model.parameters())
        self.optimizer = torch.optim.AdamW(params, **adamw_options(params))
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=precision == "fp16")
        self.forward_fn = torch.compile(self.model) if compile else self.model
        self.inputs, self.targets = random_batch(config, batch_size, device=self.device, generator=generator)

    def autocast(self) -> contextlib.AbstractContextManager:
        """The autocast context of this workload's precision (a no-op for fp32)."""
        if self.precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=_AUTOCAST_DTYPES[self.precision])

    @contextlib.contextmanager
    def _phase(self, timer: PhaseTimer, name: str, annotate: bool) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            if annotate:
                stack.enter_context(torch.profiler.record_function(name))
                if self.device.type == "cuda":
                    stack.enter_context(torch.cuda.nvtx.range(name))
            stack.enter_context(timer.phase(name))
            yield

    def step(self, mode: str, timer: PhaseTimer, *, annotate: bool = False) -> float:
        """Run one step of ``mode``, timing each phase into ``timer``; return the loss.

        With ``annotate``, each phase is also a :func:`torch.profiler.record_function`
        range and, on CUDA, an NVTX range (visible in Nsight Systems).
        """
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.optimizer.zero_grad(set_to_none=True)
        with self._phase(timer, "forward", annotate):
            with torch.set_grad_enabled(mode != "forward"), self.autocast():
                loss = lm_loss(self.forward_fn(self.inputs), self.targets)
        if mode != "forward":
            with self._phase(timer, "backward", annotate):
                self.scaler.scale(loss).backward()
        if mode == "train-step":
            with self._phase(timer, "optimizer", annotate):
                self.scaler.step(self.optimizer)
                self.scaler.update()
        return loss.item()


def measure(
    workload: Workload,
    mode: str,
    *,
    warmup: int,
    steps: int,
    timer: PhaseTimer | None = None,
) -> dict[str, Stats]:
    """Run ``warmup`` untimed steps, then ``steps`` timed ones; return :class:`Stats`
    (seconds) per phase of ``mode`` and for ``"step"``, the sum of the phases of each step."""
    if warmup < 0 or steps < 1:
        raise ValueError(f"warmup must be >= 0 and steps >= 1, got warmup={warmup}, steps={steps}")
    timer = timer or PhaseTimer(workload.device)
    for _ in range(warmup):
        workload.step(mode, timer)
    timer.clear()
    for _ in range(steps):
        workload.step(mode, timer)
    return {**timer.summary(), "step": summarize(timer.step_totals())}


def free_memory(device: torch.device) -> None:
    """Collect garbage and return cached CUDA blocks, so the next workload starts clean."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
