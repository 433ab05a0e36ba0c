"""Where a training step's memory goes: a formula, a measured breakdown, a timeline.

Training state, with P parameters kept in float32 and AdamW:

- parameters: ``4*P`` bytes; gradients: ``4*P`` bytes (float32, like the
  parameters, also under autocast); optimizer state: ``8*P`` bytes (AdamW's first
  and second moments, Loshchilov & Hutter 2019).

Activations are the tensors autograd saves in the forward pass for the backward
pass. :func:`predicted_memory` counts those of :class:`benchkit.model.TransformerLM`
tensor by tensor. Per token, with d = d_model, f = d_ff, H = heads, V = vocab, and
``a`` bytes per autocast activation (4 for fp32, 2 under bf16/fp16 autocast):

- per layer: each RMSNorm keeps its float32 input and normalized value
  (``8*d``) and its float32 reciprocal RMS (4), and the following linear keeps
  the norm's output (``a*d``): ``2*(8*d + 4 + a*d)``; under autocast, W1 and W3
  each keep their own low-precision copy of it (``a*d`` more). Attention
  (``sdpa``; ``flashattn2`` is assumed to keep the same) keeps the fused QKV
  projection (``3*a*d``: V is a view of it), the rotated queries and keys
  (``2*a*d``), its output (``a*d``) and a float32 log-sum-exp per head
  (``4*H``); the output projection keeps its re-laid-out input (``a*d``). The
  ``naive`` backend keeps the rotated queries and keys, a contiguous copy of V,
  the output projection's input (``4*a*d``) and the softmax probabilities,
  ``4*H*T`` float32 plus ``2*H*T`` for their low-precision copy under autocast
  (CUDA's autocast runs softmax in float32), and a (T, T) boolean mask per layer
  (for batch >= 2: with batch 1, torch 2.13's ``aten::matmul`` folds dimensions
  differently and keeps two more copies of the size of Q).
  The SwiGLU keeps ``W1 x``, ``W3 x``, ``SiLU(W1 x)`` and their product (``4*a*f``).
- per layer and position (not per token): the RoPE cos/sin rows, ``2*4*(Dh/2)``.
- the head: final norm ``8*d + 4 + a*d``, float32 log-probabilities ``4*V``,
  input ids and targets (``8 + 8``).
- under autocast, the low-precision copies of the weights of every matmul
  (``2 * (L*(4*d*d + 3*d*f) + d*V)`` bytes), cached for the backward pass.

The count matches what :func:`saved_tensor_bytes` observes on a CPU (a test
checks it, for ``naive`` in fp32 only: CPU autocast keeps softmax in low
precision); CUDA kernels can keep slightly different tensors, which is why
``benchkit memory`` prints the prediction next to the measurement.

On CUDA, :func:`measure_peak` measures a step's peak, its allocator timeline and
its breakdown (``benchkit memory``), and :func:`compare_with_formula` sets the
breakdowns against :func:`predicted_memory`.

Example::

    from benchkit.memory import predicted_memory
    from benchkit.model import model_config

    bytes_by_part = predicted_memory(model_config("2.7B", 256), batch_size=4, precision="bf16")
    print({k: v / 2**30 for k, v in bytes_by_part.items()})  # GiB
"""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from benchkit.devices import free_memory
from benchkit.model import ModelConfig, lm_loss, parameter_count
from benchkit.timing import PhaseTimer
from benchkit.units import GIB
from benchkit.workload import Workload, WorkloadSettings

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "compare_with_formula",
    "downsample",
    "measure_breakdown",
    "measure_peak",
    "optimizer_state_bytes",
    "plot_peaks",
    "plot_timelines",
    "predicted_memory",
    "saved_tensor_bytes",
    "timeline_from_snapshot",
]

# Most allocator events kept in the recorded history; a training step of the 2.7B
# model makes tens of thousands, and each costs memory and snapshot size.
MAX_HISTORY_EVENTS = 200_000
# Points drawn per timeline series (each a marker); longer timelines are
# reduced to the maximum of each bucket, which keeps the peaks.
TIMELINE_POINTS = 400


def predicted_memory(config: ModelConfig, batch_size: int, precision: str) -> dict[str, int]:
    """Bytes of parameters, gradients, optimizer state and activations of one
    training step of ``TransformerLM(config)`` on ``batch_size`` full-length
    sequences (the formula of the module docstring)."""
    if precision not in ("fp32", "bf16", "fp16"):
        raise ValueError(f"precision must be 'fp32', 'bf16' or 'fp16', got {precision!r}")
    params = parameter_count(config)
    d, f, heads, vocab = config.d_model, config.d_ff, config.num_heads, config.vocab_size
    layers, seq_len = config.num_layers, config.context_length
    tokens = batch_size * seq_len
    a = 4 if precision == "fp32" else 2
    norms = 2 * (8 * d + 4 + a * d) + (a * d if a == 2 else 0)
    if config.attention == "naive":
        probabilities = (4 + (2 if a == 2 else 0)) * heads * seq_len
        attention = 4 * a * d + probabilities
        per_layer_batch = seq_len * seq_len  # the boolean causal mask
    else:
        attention = 7 * a * d + 4 * heads
        per_layer_batch = 0
    per_layer_token = norms + attention + 4 * a * f
    per_layer_batch += 2 * 4 * (config.head_dim // 2) * seq_len  # RoPE rows
    head_token = 8 * d + 4 + a * d + 4 * vocab + 8 + 8
    weight_copies = 0 if a == 4 else 2 * (layers * (4 * d * d + 3 * d * f) + d * vocab)
    activations = layers * (tokens * per_layer_token + per_layer_batch) + tokens * head_token + weight_copies
    return {
        "parameters": 4 * params,
        "gradients": 4 * params,
        "optimizer_state": 8 * params,
        "activations": activations,
    }


@contextlib.contextmanager
def saved_tensor_bytes(model: torch.nn.Module) -> Iterator[dict[int, int]]:
    """Within the block, record every tensor autograd saves for backward.

    Yields a dict, filled as the forward pass runs, from storage address to
    storage size in bytes: each storage counted once however many views of it
    are saved, and the model's own parameters left out.
    """
    parameter_storages = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameter_storages:
            seen[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        yield seen


def _tensor_bytes(tensors: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of the tensors in ``optimizer.state`` (for AdamW: its moments and step counters)."""
    return _tensor_bytes(t for state in optimizer.state.values() for t in state.values())


def measure_breakdown(workload: Workload) -> dict[str, Any]:
    """Run one instrumented training step of ``workload`` and measure its memory.

    Returns bytes of ``parameters``, ``gradients`` (after backward),
    ``optimizer_state`` (after the step; AdamW creates it at its first step) and
    ``activations`` (the storages autograd saved during the forward pass, see
    :func:`saved_tensor_bytes`); on CUDA also ``allocated_after_forward``: how
    much more the allocator held after the forward pass than before it.
    """
    model, optimizer = workload.model, workload.optimizer
    cuda = workload.device.type == "cuda"
    optimizer.zero_grad(set_to_none=True)
    before = torch.cuda.memory_allocated(workload.device) if cuda else 0
    with saved_tensor_bytes(model) as saved, workload.autocast():
        # The eager model even under --compile: the formula counts eager tensors, and
        # saved-tensor hooks are not something every torch.compile version traces.
        loss = lm_loss(model(workload.inputs), workload.targets)
    result: dict[str, Any] = {"activations": sum(saved.values())}
    if cuda:
        result["allocated_after_forward"] = torch.cuda.memory_allocated(workload.device) - before
    workload.scaler.scale(loss).backward()
    del loss
    result["gradients"] = _tensor_bytes(p.grad for p in model.parameters())
    workload.scaler.step(optimizer)
    workload.scaler.update()
    result["parameters"] = _tensor_bytes(model.parameters())
    result["optimizer_state"] = optimizer_state_bytes(optimizer)
    return result


def timeline_from_snapshot(snapshot: Mapping[str, Any], *, device: int = 0, start_bytes: int = 0) -> list[int]:
    """Bytes allocated after each allocation or completed free in a CUDA memory
    snapshot (``torch.cuda.memory._snapshot()``, the dict that ``_dump_snapshot``
    pickles): its ``device_traces[device]`` events with action ``"alloc"`` add
    their ``size``, ``"free_completed"`` subtract it. ``start_bytes`` is what was
    allocated when recording began (allocations older than the trace)."""
    allocated, timeline = start_bytes, []
    for event in snapshot["device_traces"][device]:
        if event["action"] == "alloc":
            allocated += event["size"]
        elif event["action"] == "free_completed":
            allocated -= event["size"]
        else:
            continue
        timeline.append(allocated)
    return timeline


def measure_peak(
    settings: WorkloadSettings, device: torch.device, *, snapshot_path: Path | None = None
) -> dict[str, Any]:
    """Peak allocated bytes (``peak_bytes``, beyond what was allocated before) of one step of
    ``settings.mode`` after one unmeasured step of the same kind (so AdamW's state exists); CUDA only.

    With ``snapshot_path``, the allocator's history is recorded over both steps, dumped there
    (``torch.cuda.memory._dump_snapshot``: drag it into https://pytorch.org/memory_viz) and
    the row gets its ``timeline`` (bytes after each event, :func:`timeline_from_snapshot`).
    Train steps also get a ``breakdown`` (:func:`measure_breakdown`). ``status`` is ``"ok"``,
    or ``"OOM"`` if the step ran out of memory.
    """
    row: dict[str, Any] = dict(
        size=settings.size,
        context_length=settings.context_length,
        precision=settings.precision,
        mode=settings.mode,
        batch_size=settings.batch_size,
        attention=settings.attention,
    )
    free_memory(device)
    torch.cuda.reset_peak_memory_stats(device)
    start_bytes = torch.cuda.memory_allocated(device)
    if snapshot_path is not None:
        torch.cuda.memory._record_memory_history(max_entries=MAX_HISTORY_EVENTS, stacks="python", clear_history=True)
    workload = None
    try:
        workload = settings.workload(device)
        timer = PhaseTimer(device)
        workload.step(settings.mode, timer)
        torch.cuda.reset_peak_memory_stats(device)
        workload.step(settings.mode, timer)
        row["peak_bytes"] = torch.cuda.max_memory_allocated(device) - start_bytes
        if snapshot_path is not None:
            torch.cuda.memory._dump_snapshot(str(snapshot_path))
            with open(snapshot_path, "rb") as handle:
                row["timeline"] = timeline_from_snapshot(
                    pickle.load(handle), device=device.index or 0, start_bytes=start_bytes
                )
            torch.cuda.memory._record_memory_history(enabled=None)
            snapshot_path = None
        if settings.mode == "train-step":
            row["breakdown"] = measure_breakdown(workload)
        row["status"] = "ok"
    except torch.OutOfMemoryError:
        row["status"] = "OOM"
    finally:
        if snapshot_path is not None:
            torch.cuda.memory._record_memory_history(enabled=None)
        del workload
        free_memory(device)
    return row


def compare_with_formula(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Set each :func:`measure_peak` row's ``breakdown`` against :func:`predicted_memory`: the row
    gets ``predicted`` (bytes per part); returns table rows (GiB, and measured / formula per part)."""
    table = []
    for row in rows:
        if row.get("breakdown") is None:
            continue
        config = WorkloadSettings(
            size=row["size"], context_length=row["context_length"], attention=row["attention"]
        ).model_config()
        row["predicted"] = predicted_memory(config, row["batch_size"], row["precision"])
        for part, expected in row["predicted"].items():
            measured = row["breakdown"][part]
            table.append(
                {
                    "ctx": row["context_length"],
                    "prec": row["precision"],
                    "part": part,
                    "measured_GiB": measured / GIB,
                    "formula_GiB": expected / GIB,
                    "measured/formula": measured / expected,
                }
            )
        table.append(
            {
                "ctx": row["context_length"],
                "prec": row["precision"],
                "part": "allocated after forward",
                "measured_GiB": row["breakdown"]["allocated_after_forward"] / GIB,
            }
        )
    return table


def downsample(values: Sequence[int], points: int) -> tuple[list[float], list[float]]:
    """``(x, y)`` of at most ``points`` points for a long series: the largest value of each of
    ``points`` equal buckets, at the bucket's first index (peaks survive)."""
    if len(values) <= points:
        return [float(i) for i in range(len(values))], [float(v) for v in values]
    bucket = len(values) / points
    xs, ys = [], []
    for b in range(points):
        lo, hi = int(b * bucket), max(int((b + 1) * bucket), int(b * bucket) + 1)
        xs.append(float(lo))
        ys.append(float(max(values[lo:hi])))
    return xs, ys


def plot_timelines(rows: Sequence[dict[str, Any]]) -> Figure | None:
    """Allocated GiB over the allocator's events, a line per row with a ``timeline``
    (:data:`TIMELINE_POINTS` points at most, :func:`downsample`); None if no row has one."""
    from benchkit.plot import line_plot  # lazy: spawned ranks import this module and need no matplotlib

    series = {}
    for row in rows:
        if "timeline" in row:
            xs, ys = downsample(row["timeline"], TIMELINE_POINTS)
            series[f"{row['mode']} ({row['precision']}, T={row['context_length']})"] = (xs, [y / GIB for y in ys])
    if not series:
        return None
    return line_plot(
        series,
        title=f"CUDA memory over two steps (the first creates AdamW state), {rows[0]['size']}",
        xlabel="allocator event",
        ylabel="allocated GiB",
    )


def plot_peaks(rows: Sequence[dict[str, Any]]) -> Figure:
    """Peak GiB per context length (groups) for each (precision, mode) (bars); OOM rows have no bar."""
    from benchkit.plot import bar_plot  # lazy, as in plot_timelines

    contexts = list(dict.fromkeys(r["context_length"] for r in rows))
    peaks = {
        (r["context_length"], r["precision"], r["mode"]): r["peak_bytes"] / GIB for r in rows if r["status"] == "ok"
    }
    series = {
        f"{precision} {mode}": [peaks.get((t, precision, mode)) for t in contexts]
        for precision, mode in dict.fromkeys((r["precision"], r["mode"]) for r in rows)
    }
    return bar_plot(
        [f"T={t}" for t in contexts],
        series,
        title=f"Peak CUDA memory, {rows[0]['size']}, batch {rows[0]['batch_size']}",
        ylabel="GiB",
    )
