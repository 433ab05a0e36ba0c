"""The reference workload: the Transformer of :mod:`benchkit.model` with AdamW on a random batch.

:class:`Workload` builds it on a device as a :class:`benchkit.training.Trainer`;
:class:`WorkloadSettings` names one configuration of it, and :func:`benchmark`
measures one configuration into a result row (what ``benchkit model`` prints,
and the model sections of ``precision`` and ``run``).

Example::

    from benchkit.workload import WorkloadSettings, benchmark

    row = benchmark(WorkloadSettings(size="tiny", context_length=64, precision="bf16", warmup=1, steps=3), device="cpu")
    print(row["step"].mean, "seconds per training step", row["tokens_per_s"], "tokens/s")
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from benchkit.devices import free_memory
from benchkit.flops import model_flops, peak_flops
from benchkit.model import (
    ATTENTION_BACKENDS,
    SIZES,
    ModelConfig,
    TransformerLM,
    model_config,
    parameter_count,
    random_batch,
)
from benchkit.training import MODES, PRECISIONS, Trainer, adamw_options, measure

__all__ = ["GPU_SIZES", "Workload", "WorkloadSettings", "benchmark", "table_rows"]

# The size measured on a GPU when none is named (a CPU gets "tiny": benchkit.options.default_sizes).
GPU_SIZES = ("small",)


class Workload(Trainer):
    """A model, its AdamW optimizer and one random batch, placed on a device, ready to :meth:`step`.

    The optimizer is ``torch.optim.AdamW`` with :func:`benchkit.training.adamw_options` (fused on CUDA).

    Arguments:
        config: the model's shape and attention backend.
        batch_size: sequences per step; each has ``config.context_length`` tokens.
        device: where everything lives.
        precision: ``"fp32"``, ``"bf16"`` or ``"fp16"`` (see :mod:`benchkit.training`).
        compile: call the model through :func:`torch.compile` (the first steps compile).
        seed: seeds the parameters and the batch.

    Attributes (besides the :class:`~benchkit.training.Trainer`'s): ``config``,
    ``batch_size``, ``inputs`` and ``targets`` (the batch).
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
        device = torch.device(device)
        generator = torch.Generator().manual_seed(seed)
        # Built directly on the device: initializing a 2.7B-parameter model on the CPU
        # first would take longer than measuring it.
        with torch.random.fork_rng(devices=[]), device:
            torch.manual_seed(seed)
            model = TransformerLM(config)
        params = list(model.parameters())
        optimizer = torch.optim.AdamW(params, **adamw_options(params))
        self.config = config
        self.batch_size = batch_size
        self.inputs, self.targets = random_batch(config, batch_size, device=device, generator=generator)
        super().__init__(
            model,
            optimizer,
            [(self.inputs, self.targets)],
            precision=precision,
            wrapper=torch.compile(model) if compile else None,
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkloadSettings:
    """One configuration of the reference workload, and how many steps to time.

    Attributes:
        size: a key of :data:`benchkit.model.SIZES`.
        context_length: tokens per sequence.
        batch_size: sequences per step.
        mode: one of :data:`benchkit.training.MODES`.
        precision: one of :data:`benchkit.training.PRECISIONS`.
        attention: one of :data:`benchkit.model.ATTENTION_BACKENDS`.
        compile: run the model through :func:`torch.compile`.
        warmup: untimed steps first.
        steps: timed steps.
    """

    size: str
    context_length: int = 256
    batch_size: int = 4
    mode: str = "train-step"
    precision: str = "fp32"
    attention: str = "sdpa"
    compile: bool = False
    warmup: int = 5
    steps: int = 10

    def __post_init__(self) -> None:
        for name, value, allowed in (
            ("size", self.size, SIZES),
            ("mode", self.mode, MODES),
            ("precision", self.precision, PRECISIONS),
            ("attention", self.attention, ATTENTION_BACKENDS),
        ):
            if value not in allowed:
                raise ValueError(f"WorkloadSettings.{name} must be one of {tuple(allowed)}, got {value!r}")
        if self.warmup < 0 or self.steps < 1:
            raise ValueError(f"WorkloadSettings needs warmup >= 0 and steps >= 1, got {self.warmup} and {self.steps}")

    def model_config(self) -> ModelConfig:
        """The :class:`~benchkit.model.ModelConfig` of this size, context length and attention."""
        return model_config(self.size, self.context_length, attention=self.attention)

    def workload(self, device: torch.device | str) -> Workload:
        """The :class:`Workload` of these settings on ``device``."""
        return Workload(
            self.model_config(),
            batch_size=self.batch_size,
            device=device,
            precision=self.precision,
            compile=self.compile,
        )


def benchmark(settings: WorkloadSettings, device: torch.device | str) -> dict[str, Any]:
    """Measure one configuration on ``device``; return its result row.

    The row holds the settings (``size``, ``parameters``, ``context_length``,
    ``batch_size``, ``mode``, ``precision``, ``attention``, ``compile``, ``warmup``,
    ``steps``) and ``status``: ``"ok"``, or ``"OOM"`` if it ran out of GPU memory.
    An ``"ok"`` row also has ``phases`` (phase name -> :class:`~benchkit.timing.Stats`
    in seconds), ``step`` (Stats of whole steps), ``tokens_per_s`` (tokens per mean
    step), ``model_flops`` (per step, :func:`benchkit.flops.model_flops`),
    ``peak_flops`` and ``mfu`` (a fraction; None off GPU or for a GPU of unknown peak).
    """
    device = torch.device(device)
    config = settings.model_config()
    row: dict[str, Any] = dict(
        size=settings.size,
        parameters=parameter_count(config),
        context_length=settings.context_length,
        batch_size=settings.batch_size,
        mode=settings.mode,
        precision=settings.precision,
        attention=settings.attention,
        compile=settings.compile,
        warmup=settings.warmup,
        steps=settings.steps,
    )
    workload = stats = None
    try:
        workload = settings.workload(device)
        stats = measure(workload, settings.mode, warmup=settings.warmup, steps=settings.steps)
    except torch.OutOfMemoryError:
        pass  # recorded below; memory is freed once the exception (and its frames) are gone
    del workload
    free_memory(device)
    if stats is None:
        return {**row, "status": "OOM"}
    step = stats.pop("step")
    flops = model_flops(config, settings.batch_size, settings.context_length, backward=settings.mode != "forward")
    peak = None
    if device.type == "cuda":
        peak = peak_flops(
            torch.cuda.get_device_name(device),
            settings.precision,
            float32_matmul_precision=torch.get_float32_matmul_precision(),
        )
    return {
        **row,
        "status": "ok",
        "phases": stats,
        "step": step,
        "tokens_per_s": settings.batch_size * settings.context_length / step.mean,
        "model_flops": flops,
        "peak_flops": peak,
        "mfu": flops / step.mean / peak if peak else None,
    }


def table_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The printed view of :func:`benchmark` rows: parameters in millions, times in milliseconds, MFU in percent."""
    printed = []
    for row in rows:
        line = {
            "size": row["size"],
            "params_M": row["parameters"] / 1e6,
            "ctx": row["context_length"],
            "mode": row["mode"],
            "prec": row["precision"],
        }
        if row["status"] != "ok":
            printed.append({**line, "status": row["status"]})
            continue
        for phase, short in (("forward", "fwd_ms"), ("backward", "bwd_ms"), ("optimizer", "opt_ms")):
            line[short] = row["phases"][phase].mean * 1e3 if phase in row["phases"] else None
        step = row["step"]
        line.update(
            {
                "step_ms": step.mean * 1e3,
                "std_ms": step.std * 1e3,
                "median_ms": step.median * 1e3,
                "min_ms": step.min * 1e3,
                "max_ms": step.max * 1e3,
                "tokens/s": row["tokens_per_s"],
                "MFU_%": row["mfu"] * 100 if row["mfu"] is not None else None,
            }
        )
        printed.append(line)
    return printed
