"""The mixed-precision facts, measured on this machine (``benchkit precision``).

Three parts:

- ``accumulation`` (:func:`accumulation_rows`): add a value (``benchkit
  precision`` takes 0.01) a number of times (1000) one addition at a time, with the running sum and the addend in fp32,
  fp16, bf16 and fp64, and with low-precision addends into an fp32 accumulator
  (what mixed precision does). The exact decimal result (``count * value``, in
  rational arithmetic) is computed, not assumed, and each row reports its error.
  Every addition rounds to the accumulator's spacing of representable numbers:
  in fp16 those rounding errors pile up, and in bf16 the sum stalls for good
  once half that spacing exceeds the addend. An fp32 accumulator of the same
  low-precision addends is off mostly by the rounding of the addend itself.
  A sum beyond its accumulator's range (fp16's largest finite value is 65504), or
  an addend beyond its own dtype's, is infinite: the row says so in its ``note``
  and its errors are infinite (null in the JSON, which has no infinity).
- ``autocast`` (:func:`autocast_rows`): the dtype each layer of a small model (Linear, ReLU, LayerNorm,
  Linear) produces under :func:`torch.autocast` with fp16 and with bf16 on the
  device, and the dtypes of the parameters, the loss and the gradients. A dtype
  the device's autocast does not support is recorded as unsupported.
- ``step-time`` (:func:`step_time_rows`): training-step time of the reference model
  (:func:`benchkit.workload.benchmark`, mode ``train-step``) in fp32 and with bf16
  autocast across model sizes, mean and std over the timed steps after the warm-up;
  a configuration that runs out of GPU memory is recorded as ``"OOM"``.

Example::

    from benchkit.precision import StepTimeSweep, accumulation_rows, step_time_rows

    print(accumulation_rows(0.01, 1000))  # the bf16 sum stalls at 4.0
    print(step_time_rows(StepTimeSweep(sizes=("tiny",), context_length=32, warmup=1, steps=2), device="cpu"))
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from fractions import Fraction
from typing import Any

import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from torch import nn

from benchkit.plot import bar_plot
from benchkit.report import progress
from benchkit.units import DTYPES, dtype_name
from benchkit.workload import WorkloadSettings, benchmark

__all__ = [
    "GPU_SIZES",
    "PARTS",
    "StepTimeSweep",
    "accumulation_rows",
    "autocast_rows",
    "plot_step_time",
    "step_time_rows",
]

PARTS = ("accumulation", "autocast", "step-time")
# (accumulator, addend) pairs: each precision on its own, then low-precision
# addends summed into an fp32 accumulator as mixed precision does.
ACCUMULATIONS = [
    ("fp64", "fp64"),
    ("fp32", "fp32"),
    ("fp16", "fp16"),
    ("bf16", "bf16"),
    ("fp32", "fp16"),
    ("fp32", "bf16"),
]
AUTOCAST_DTYPES = ("fp16", "bf16")
# The sizes whose step time is measured on a GPU when none are named: every named size but tiny.
GPU_SIZES = ("small", "medium", "large", "xl", "2.7B")


def accumulate(value: float, count: int, accumulator: str, addend: str) -> float:
    """Sum ``value`` (rounded to ``addend``'s dtype) ``count`` times into a zero of
    ``accumulator``'s dtype, one in-place addition at a time; return the sum."""
    total = torch.zeros((), dtype=DTYPES[accumulator])
    term = torch.tensor(value, dtype=DTYPES[addend])
    for _ in range(count):
        total += term  # the in-place add keeps the accumulator's dtype
    return total.item()


def accumulation_rows(value: float, count: int) -> list[dict[str, Any]]:
    """One row per :data:`ACCUMULATIONS` pair: the sum, and its error against the exact
    ``count * value`` with ``value`` (finite) read as the decimal it prints as (0.01 is 1/100).

    A sum that overflowed (see :func:`overflow_note`) is infinite, and so are its
    errors; ``exact`` is infinite too where it is beyond float64's range."""
    exact = count * Fraction(repr(value))
    exact_float = _float(exact)
    rows = []
    for accumulator, addend in ACCUMULATIONS:
        result = accumulate(value, count, accumulator, addend)
        addend_value = torch.tensor(value, dtype=DTYPES[addend]).item()
        if math.isfinite(result):
            error = abs(Fraction(result) - exact)
            abs_error, note = float(error), ""
            rel_error = float(error / abs(exact)) if exact else None
        else:
            abs_error = rel_error = math.inf
            note = overflow_note(accumulator, addend, addend_value)
        rows.append(
            {
                "accumulator": accumulator,
                "addend": addend,
                "addend_value": addend_value,
                "sum": result,
                "exact": exact_float,
                "abs_error": abs_error,
                "rel_error": rel_error,
                "note": note,
            }
        )
    return rows


def overflow_note(accumulator: str, addend: str, addend_value: float) -> str:
    """Why a sum is infinite: the addend (``addend_value``, the value rounded to ``addend``'s
    dtype) is, or else the running sum went beyond ``accumulator``'s largest finite value."""
    what, dtype = ("the addend", addend) if math.isinf(addend_value) else ("the sum", accumulator)
    return f"overflow: {what} is beyond {dtype}'s range (largest finite value {torch.finfo(DTYPES[dtype]).max:.5g})"


def _float(number: Fraction) -> float:
    """``float(number)``, or plus or minus infinity beyond float64's range (where ``float`` raises)."""
    try:
        return float(number)
    except OverflowError:
        return math.inf if number > 0 else -math.inf


class SmallModel(nn.Module):
    """Linear -> ReLU -> LayerNorm -> Linear; (B, in_features) -> (B, out_features) logits."""

    def __init__(self, in_features: int = 16, hidden: int = 10, out_features: int = 5) -> None:
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.relu = nn.ReLU()
        self.ln = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.ln(self.relu(self.fc1(x))))


def autocast_supported(device: torch.device, dtype: torch.dtype) -> tuple[bool, str]:
    """Whether ``torch.autocast(device.type, dtype)`` is active here, and why not if it is not."""
    if not torch.amp.autocast_mode.is_autocast_available(device.type):
        return False, f"torch.autocast has no {device.type} implementation"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autocast(device.type, dtype=dtype):
            active = torch.is_autocast_enabled(device.type)
    if not active:
        return False, "; ".join(str(w.message) for w in caught) or "autocast disabled itself"
    return True, ""


def autocast_rows(device: torch.device, batch_size: int = 8) -> list[dict[str, Any]]:
    """Per autocast dtype: a row per layer (its output dtype and its parameters' dtype), then
    rows for the logits, the loss and the parameter gradients after backward."""
    rows: list[dict[str, Any]] = []
    for name in AUTOCAST_DTYPES:
        supported, reason = autocast_supported(device, DTYPES[name])
        if not supported:
            rows.append({"autocast": name, "tensor": "-", "dtype": None, "note": f"unsupported: {reason}"})
            continue
        model = SmallModel().to(device)
        outputs: list[tuple[str, torch.dtype]] = []
        hooks = [
            module.register_forward_hook(
                lambda mod, args, out, label=label, outputs=outputs: outputs.append((label, out.dtype))
            )
            for label, module in model.named_children()
        ]
        x = torch.randn(batch_size, model.fc1.in_features, device=device)
        targets = torch.randint(0, model.fc2.out_features, (batch_size,), device=device)
        with torch.autocast(device.type, dtype=DTYPES[name]):
            logits = model(x)
            loss = F.cross_entropy(logits, targets)
        loss.backward()
        for hook in hooks:
            hook.remove()
        for label, dtype in outputs:
            module = getattr(model, label)
            params = sorted({dtype_name(p.dtype) for p in module.parameters()})
            rows.append(
                {
                    "autocast": name,
                    "tensor": f"{label} ({type(module).__name__}) output",
                    "dtype": dtype_name(dtype),
                    "note": f"parameters {', '.join(params) or 'none'}",
                }
            )
        rows.append({"autocast": name, "tensor": "logits", "dtype": dtype_name(logits.dtype), "note": ""})
        rows.append({"autocast": name, "tensor": "loss (cross_entropy)", "dtype": dtype_name(loss.dtype), "note": ""})
        grads = sorted({dtype_name(p.grad.dtype) for p in model.parameters()})
        rows.append({"autocast": name, "tensor": "parameter gradients", "dtype": ", ".join(grads), "note": ""})
    return rows


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepTimeSweep:
    """The step-time part's cells: every size in every precision, each a train step of
    ``batch_size`` sequences of ``context_length`` tokens, ``warmup`` untimed then ``steps`` timed."""

    sizes: tuple[str, ...]
    precisions: tuple[str, ...] = ("fp32", "bf16")
    context_length: int = 256
    batch_size: int = 4
    warmup: int = 5
    steps: int = 10


def step_time_rows(sweep: StepTimeSweep, device: torch.device | str) -> list[dict[str, Any]]:
    """Train-step time (ms, mean and std) of each size in each precision; ``"OOM"`` where it does not fit."""
    rows = []
    cells = [(size, precision) for size in sweep.sizes for precision in sweep.precisions]
    for size, precision in progress(cells, desc="precision step-time"):
        row: dict[str, Any] = {
            "size": size,
            "precision": precision,
            "context_length": sweep.context_length,
            "batch_size": sweep.batch_size,
            "step_ms": None,
            "step_std_ms": None,
        }
        result = benchmark(
            WorkloadSettings(
                size=size,
                context_length=sweep.context_length,
                batch_size=sweep.batch_size,
                precision=precision,
                warmup=sweep.warmup,
                steps=sweep.steps,
            ),
            device,
        )
        if result["status"] == "ok":
            row["step_ms"], row["step_std_ms"] = result["step"].mean * 1e3, result["step"].std * 1e3
        else:
            row["step_ms"] = row["step_std_ms"] = result["status"]
        rows.append(row)
    return rows


def plot_step_time(rows: list[dict[str, Any]]) -> Figure | None:
    """A bar chart of :func:`step_time_rows`' ms per step, a group per size and a bar per precision;
    None if no cell has a time (every one ran out of memory)."""
    if not any(isinstance(r["step_ms"], float) for r in rows):
        return None
    sizes = list(dict.fromkeys(r["size"] for r in rows))
    precisions = list(dict.fromkeys(r["precision"] for r in rows))

    def ms(size: str, precision: str) -> float | None:
        value = next(r["step_ms"] for r in rows if r["size"] == size and r["precision"] == precision)
        return value if isinstance(value, float) else None

    series = {p: [ms(s, p) for s in sizes] for p in precisions}
    return bar_plot(sizes, series, title="Train-step time by precision", ylabel="ms per step")
