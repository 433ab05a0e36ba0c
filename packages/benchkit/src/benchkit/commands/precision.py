"""``benchkit precision``: the mixed-precision facts, measured on this machine.

Three parts (``--part``, default all):

- ``accumulation``: add ``--value`` (default 0.01) ``--count`` times (default
  1000) one addition at a time, with the running sum and the addend in fp32,
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
- ``autocast``: the dtype each layer of a small model (Linear, ReLU, LayerNorm,
  Linear) produces under :func:`torch.autocast` with fp16 and with bf16 on the
  device, and the dtypes of the parameters, the loss and the gradients. A dtype
  the device's autocast does not support is recorded as unsupported.
- ``step-time``: training-step time of the reference model
  (:func:`benchkit.commands.model.benchmark`, mode ``train-step``) in fp32 and with bf16
  autocast across model sizes, mean and std over ``--steps`` after ``--warmup``;
  a configuration that runs out of GPU memory is recorded as ``"OOM"``.

Each part prints a table and writes ``precision_<part>.json``; step-time also
draws ``precision_step_time.png``.
"""

from __future__ import annotations

import argparse
import math
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from benchkit.argtypes import finite_float, non_negative_int, positive_int
from benchkit.commands.model import benchmark
from benchkit.model import SIZES
from benchkit.plot import bar_plot
from benchkit.report import add_output_arguments, format_table, progress, write_results
from benchkit.workload import add_device_argument, default_sizes, resolve_device

HELP = "mixed precision: fp16/bf16 accumulation error, autocast dtypes per layer, fp32 vs bf16 step time"
EXAMPLES = """\
  benchkit precision                                   # all three parts; tiny model on a CPU
  benchkit precision --part accumulation --value 0.1 --count 10000
  benchkit precision --part autocast --device cuda
  benchkit precision --part step-time --size small medium large xl 2.7B --precision fp32 bf16
"""

PARTS = ("accumulation", "autocast", "step-time")
DTYPES = {"fp64": torch.float64, "fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
# (accumulator, addend) pairs: each precision on its own, then low-precision
# addends summed into an fp32 accumulator as mixed precision does.
ACCUMULATIONS = [("fp64", "fp64"), ("fp32", "fp32"), ("fp16", "fp16"), ("bf16", "bf16"),
                 ("fp32", "fp16"), ("fp32", "bf16")]
AUTOCAST_DTYPES = ("fp16", "bf16")
STEP_PRECISIONS = ("fp32", "bf16", "fp16")
GPU_STEP_SIZES = ["small", "medium", "large", "xl", "2.7B"]  # the named sizes of issue 6


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
        rows.append({
            "accumulator": accumulator,
            "addend": addend,
            "addend_value": addend_value,
            "sum": result,
            "exact": exact_float,
            "abs_error": abs_error,
            "rel_error": rel_error,
            "note": note,
        })
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
            module.register_forward_hook(lambda mod, args, out, label=label: outputs.append((label, out.dtype)))
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
            params = sorted({_dtype_name(p.dtype) for p in module.parameters()})
            rows.append({"autocast": name, "tensor": f"{label} ({type(module).__name__}) output",
                         "dtype": _dtype_name(dtype), "note": f"parameters {', '.join(params) or 'none'}"})
        rows.append({"autocast": name, "tensor": "logits", "dtype": _dtype_name(logits.dtype), "note": ""})
        rows.append({"autocast": name, "tensor": "loss (cross_entropy)", "dtype": _dtype_name(loss.dtype), "note": ""})
        grads = sorted({_dtype_name(p.grad.dtype) for p in model.parameters()})
        rows.append({"autocast": name, "tensor": "parameter gradients", "dtype": ", ".join(grads), "note": ""})
    return rows


def _dtype_name(dtype: torch.dtype) -> str:
    return DTYPE_NAMES.get(dtype, str(dtype))


def step_time_rows(
    sizes: Sequence[str],
    precisions: Sequence[str],
    *,
    context_length: int,
    batch_size: int,
    warmup: int,
    steps: int,
    device: torch.device,
) -> list[dict[str, Any]]:
    """Train-step time (ms, mean and std) of each size in each precision; ``"OOM"`` where it does not fit."""
    rows = []
    cells = [(size, precision) for size in sizes for precision in precisions]
    for size, precision in progress(cells, desc="precision step-time"):
        row: dict[str, Any] = {"size": size, "precision": precision, "context_length": context_length,
                               "batch_size": batch_size, "step_ms": None, "step_std_ms": None}
        result = benchmark(size, context_length, "train-step", precision, batch_size=batch_size, attention="sdpa",
                           compile=False, device=device, warmup=warmup, steps=steps)
        if result["status"] == "ok":
            row["step_ms"], row["step_std_ms"] = result["step"].mean * 1e3, result["step"].std * 1e3
        else:
            row["step_ms"] = row["step_std_ms"] = result["status"]
        rows.append(row)
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--part", choices=PARTS, nargs="+", default=list(PARTS), help="what to run (default: all)")
    parser.add_argument("--value", type=finite_float, default=0.01,
                        help="accumulation: the addend, a finite number (default: 0.01)")
    parser.add_argument("--count", type=positive_int, default=1000, help="accumulation: additions (default: 1000)")
    parser.add_argument("--size", choices=list(SIZES), nargs="+",
                        help="step-time: model sizes (default: tiny on CPU, small medium large xl 2.7B on GPU)")
    parser.add_argument("--precision", choices=STEP_PRECISIONS, nargs="+", default=["fp32", "bf16"],
                        help="step-time: precisions (default: fp32 bf16)")
    parser.add_argument("--context-length", type=positive_int, default=256, metavar="T",
                        help="step-time: tokens per sequence (default: 256)")
    parser.add_argument("--batch-size", type=positive_int, default=4, metavar="B",
                        help="step-time: sequences per step (default: 4)")
    parser.add_argument("--warmup", type=non_negative_int, default=5, help="step-time: untimed steps (default: 5)")
    parser.add_argument("--steps", type=positive_int, default=10, help="step-time: timed steps (default: 10)")
    add_device_argument(parser)
    add_output_arguments(parser)


def run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    written = []
    if "accumulation" in args.part:
        rows = accumulation_rows(args.value, args.count)
        print(f"sum of {args.value!r} added {args.count} times (exact: {rows[0]['exact']!r})")
        print(format_table(rows) + "\n")
        written.append(write_results(args.out, "precision_accumulation", rows,
                                     meta={"value": args.value, "count": args.count}, csv=args.csv))
    if "autocast" in args.part:
        rows = autocast_rows(device)
        print(f"dtypes under torch.autocast on {device} (model: Linear -> ReLU -> LayerNorm -> Linear)")
        print(format_table(rows) + "\n")
        written.append(write_results(args.out, "precision_autocast", rows, meta={"device": str(device)},
                                     csv=args.csv))
    if "step-time" in args.part:
        sizes = args.size or (GPU_STEP_SIZES if device.type == "cuda" else default_sizes(device))
        rows = step_time_rows(sizes, args.precision, context_length=args.context_length,
                              batch_size=args.batch_size, warmup=args.warmup, steps=args.steps, device=device)
        print(f"train-step time on {device}, batch {args.batch_size} x {args.context_length} tokens")
        print(format_table(rows) + "\n")
        meta = {"device": str(device), "warmup": args.warmup, "steps": args.steps, "mode": "train-step"}
        written.append(write_results(args.out, "precision_step_time", rows, meta=meta, csv=args.csv))
        if any(isinstance(r["step_ms"], float) for r in rows):
            written.append(_plot_step_time(Path(args.out) / "precision_step_time.png", rows, sizes, args.precision))
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def _plot_step_time(path: Path, rows: list[dict[str, Any]], sizes: Sequence[str], precisions: Sequence[str]) -> Path:
    def ms(size: str, precision: str) -> float | None:
        value = next(r["step_ms"] for r in rows if r["size"] == size and r["precision"] == precision)
        return value if isinstance(value, float) else None

    series = {p: [ms(s, p) for s in sizes] for p in precisions}
    return bar_plot(path, list(sizes), series, title="Train-step time by precision", ylabel="ms per step")
