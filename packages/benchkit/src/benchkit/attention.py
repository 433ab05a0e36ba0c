"""Attention implementations side by side across sequence lengths and head dims.

Implementations (all causal, inputs q, k, v of shape (B, H, N, D)):

- ``naive``: ``softmax(q k^T / sqrt(D) + causal mask) v``, materializing the
  (N, N) scores per head (the reference model's ``naive`` backend);
- ``naive-compiled``: the same function through :func:`torch.compile`;
- ``sdpa``: :func:`torch.nn.functional.scaled_dot_product_attention` (PyTorch
  picks its kernel: FlashAttention, memory-efficient or cuDNN on a GPU);
- ``flashattn2``: this repository's FlashAttention-2 kernel (imported lazily).
  It runs as Triton kernels on CUDA; on a CPU as Triton kernels in Triton's
  interpreter when ``TRITON_INTERPRET=1``, else as flashattn2's tiled PyTorch
  implementation. Every row's ``backend`` says which ran (:func:`backend_of`).

For each (implementation, dtype, N, D) cell, :func:`run_sweep` times the forward
pass (with autograd recording, as in training), the backward pass alone (from a
retained graph) and forward+backward, in milliseconds: the median of
:func:`triton.testing.do_bench` on CUDA, the median of ``reps`` runs timed by
:class:`benchkit.timing.PhaseTimer` on a CPU. On CUDA it also measures the peak
memory one forward+backward allocates beyond q, k, v and the output gradient
(``torch.cuda.max_memory_allocated``; the output and dq, dk, dv included), next
to the O(N^2) accounting: one (N, N) matrix per head, ``B*H*N^2*bytes(dtype)``;
the naive implementation keeps the softmax probabilities (one such matrix) and
the boolean mask (N^2 bytes) for backward and holds up to three score-sized
matrices at once in forward, while FlashAttention-2 keeps only O(B*H*N*D).

A pass that runs out of GPU memory is recorded as ``"OOM"`` and the sweep goes
on. Any other failure of a cell is recorded in its ``status`` and printed on
stderr, and the sweep goes on.

Example::

    from benchkit.attention import AttentionSweep, run_sweep

    rows = run_sweep(AttentionSweep(seq_lens=(64, 128), head_dims=(16,), dtypes=("fp32",), heads=2), device="cpu")
    print([(r["implementation"], r["backend"], r["seq_len"], r["forward_backward_ms"]) for r in rows])
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch._functorch.config
from matplotlib.figure import Figure

from benchkit import model
from benchkit.devices import free_memory
from benchkit.plot import line_plot
from benchkit.report import progress
from benchkit.timing import PhaseTimer
from benchkit.units import DTYPES, MIB

__all__ = [
    "BACKEND_NOTES",
    "DTYPE_NAMES",
    "IMPLEMENTATIONS",
    "AttentionSweep",
    "attention_function",
    "backend_of",
    "default_sweep",
    "measure_cell",
    "plot_sweep",
    "run_sweep",
]

IMPLEMENTATIONS = ("naive", "naive-compiled", "sdpa", "flashattn2")
DTYPE_NAMES = ("fp32", "bf16", "fp16")
PASSES = {"forward": "forward_ms", "backward": "backward_ms", "forward+backward": "forward_backward_ms"}
OOM = "OOM"
DEFAULT_HEADS = 16  # the head count of the headline shape B=1, H=16, N=16384, D=64 (BENCHMARKS.md)
# What each of flashattn2's backends (backend_of) means for its times; the report and the command say it.
BACKEND_NOTES = {
    "triton": "its Triton kernels, compiled for the GPU",
    "triton-interpreter": "its Triton kernels run by Triton's interpreter on the CPU (TRITON_INTERPRET=1), "
    "which times the interpreter, not the kernels",
    "pytorch-tiled": "flashattn2's tiled PyTorch implementation, its CPU fallback without TRITON_INTERPRET=1: "
    "the Triton kernels did not run",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class AttentionSweep:
    """Which cells to measure, and how.

    Attributes:
        seq_lens, head_dims: N and D values (positive ints).
        dtypes: names in :data:`DTYPE_NAMES`.
        implementations: names in :data:`IMPLEMENTATIONS`.
        batch_size, heads: B and H of the (B, H, N, D) inputs.
        reps: timed runs per pass on a CPU (the median is reported; CUDA uses ``do_bench``).
        compile_backend: :func:`torch.compile` backend of ``naive-compiled``.
    """

    seq_lens: tuple[int, ...]
    head_dims: tuple[int, ...]
    dtypes: tuple[str, ...]
    implementations: tuple[str, ...] = IMPLEMENTATIONS
    batch_size: int = 1
    heads: int = DEFAULT_HEADS
    reps: int = 3
    compile_backend: str = "inductor"

    def __post_init__(self) -> None:
        for name in ("seq_lens", "head_dims"):
            values = getattr(self, name)
            if not values or not all(isinstance(v, int) and v > 0 for v in values):
                raise ValueError(f"{name} must be a non-empty sequence of positive ints, got {values!r}")
        for name, allowed in (("dtypes", DTYPE_NAMES), ("implementations", IMPLEMENTATIONS)):
            values = getattr(self, name)
            if not values or any(v not in allowed for v in values):
                raise ValueError(f"{name} must be a non-empty sequence of {allowed}, got {values!r}")
        for name in ("batch_size", "heads", "reps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


def default_sweep(device: torch.device) -> AttentionSweep:
    """``benchkit attention``'s cells when none are named: on a GPU, N 128 ... 65536, D 16 ... 128,
    bf16 and fp32 (batch 1, causal, 16 heads); on a CPU a few small cells that finish in seconds."""
    if device.type == "cuda":
        return AttentionSweep(
            seq_lens=tuple(2**k for k in range(7, 17)), head_dims=(16, 32, 64, 128), dtypes=("bf16", "fp32")
        )
    return AttentionSweep(seq_lens=(64, 128, 256), head_dims=(16, 64), dtypes=("fp32",))


def attention_function(implementation: str, *, compile_backend: str = "inductor") -> Callable[..., torch.Tensor]:
    """Causal attention ``f(q, k, v) -> o`` on (B, H, N, D) tensors for one of :data:`IMPLEMENTATIONS`.

    ``compile_backend`` is the :func:`torch.compile` backend of ``naive-compiled``.
    Each call of this function compiles afresh, so shapes never pile up in one cache.
    """
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(f"implementation must be one of {IMPLEMENTATIONS}, got {implementation!r}")
    if implementation == "naive-compiled":
        torch._dynamo.reset()  # a fresh cache: one compiled graph per cell, no recompile limit reached
        return torch.compile(model.attention_function("naive"), backend=compile_backend, dynamic=False)
    return model.attention_function(implementation)


def backend_of(implementation: str, device: torch.device, *, compile_backend: str = "inductor") -> str:
    """What actually computes ``implementation`` on ``device``, for the rows and the report:

    - ``naive``, ``sdpa``: ``"pytorch"``; ``naive-compiled``: ``"torch.compile/<compile_backend>"``;
    - ``flashattn2``: ``"triton"`` (its kernels, compiled for a GPU), ``"triton-interpreter"``
      (its kernels in Triton's interpreter on a CPU, ``TRITON_INTERPRET=1``) or
      ``"pytorch-tiled"`` (flashattn2's tiled PyTorch implementation, the CPU fallback),
      as :func:`flashattn2.api.resolve_backend` decides for the default backend.
    """
    if implementation == "naive-compiled":
        return f"torch.compile/{compile_backend}"
    if implementation != "flashattn2":
        return "pytorch"
    import flashattn2.api  # lazy: only sweeps that run flashattn2 need Triton

    if flashattn2.api.resolve_backend("auto", device) == "pytorch":
        return "pytorch-tiled"
    return "triton" if device.type == "cuda" else "triton-interpreter"


def _median_ms(fn: Callable[[], Any], device: torch.device, grads: Sequence[torch.Tensor], reps: int) -> float:
    """Median milliseconds of ``fn()``; the ``.grad`` of ``grads`` is reset before every run."""
    if device.type == "cuda":
        from triton.testing import do_bench  # lazy: Triton is needed on CUDA only

        return float(do_bench(fn, grad_to_none=list(grads), return_mode="median"))
    timer = PhaseTimer(device)
    for _ in range(reps):
        for tensor in grads:
            tensor.grad = None
        with timer.phase("run"):
            fn()
    return timer.summary()["run"].median * 1e3


def _retainable_backward(implementation: str) -> contextlib.AbstractContextManager:
    """For ``naive-compiled``: compile without donated buffers, so that its backward can run
    again from a retained graph (AOTAutograd refuses ``retain_graph=True`` otherwise)."""
    if implementation != "naive-compiled":
        return contextlib.nullcontext()
    return torch._functorch.config.patch(donated_buffer=False)


def _measure_passes(
    row: dict[str, Any], implementation: str, *, device: torch.device, reps: int, compile_backend: str
) -> None:
    """Fill ``row``'s timings (and on CUDA its peak memory); a pass that fails raises."""
    fn = attention_function(implementation, compile_backend=compile_backend)
    shape = (row["batch_size"], row["heads"], row["seq_len"], row["head_dim"])
    dtype = DTYPES[row["dtype"]]
    q, k, v = (torch.randn(shape, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
    grad_out = torch.randn(shape, device=device, dtype=dtype)
    inputs = (q, k, v)
    fn(q, k, v).backward(grad_out)  # warm-up (and compilation) outside the timings
    row["forward_ms"] = _median_ms(lambda: fn(q, k, v), device, inputs, reps)
    out = fn(q, k, v)
    row["backward_ms"] = _median_ms(lambda out=out: out.backward(grad_out, retain_graph=True), device, inputs, reps)
    del out
    row["forward_backward_ms"] = _median_ms(lambda: fn(q, k, v).backward(grad_out), device, inputs, reps)
    if device.type == "cuda":
        q.grad = k.grad = v.grad = None
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        baseline = torch.cuda.memory_allocated(device)
        fn(q, k, v).backward(grad_out)
        torch.cuda.synchronize(device)
        row["peak_memory_mib"] = (torch.cuda.max_memory_allocated(device) - baseline) / MIB


def measure_cell(
    implementation: str,
    *,
    seq_len: int,
    head_dim: int,
    dtype: str,
    batch_size: int,
    heads: int,
    device: torch.device,
    reps: int,
    compile_backend: str,
) -> dict[str, Any]:
    """Time one (implementation, dtype, N, D) cell; see the module docstring for what is measured."""
    row: dict[str, Any] = {
        "implementation": implementation,
        "backend": None,  # filled in first thing below: flashattn2 may fail to import
        "dtype": dtype,
        "seq_len": seq_len,
        "head_dim": head_dim,
        "batch_size": batch_size,
        "heads": heads,
        **dict.fromkeys(PASSES.values()),
        "peak_memory_mib": None,
        "scores_mib": batch_size * heads * seq_len**2 * DTYPES[dtype].itemsize / MIB,
        "status": "ok",
    }
    try:
        row["backend"] = backend_of(implementation, device, compile_backend=compile_backend)
        with _retainable_backward(implementation):
            _measure_passes(row, implementation, device=device, reps=reps, compile_backend=compile_backend)
    except Exception as error:
        if isinstance(error, torch.OutOfMemoryError):
            row["status"] = OOM
            for column in PASSES.values():
                if row[column] is None:
                    row[column] = OOM
            if row["peak_memory_mib"] is None and device.type == "cuda":
                row["peak_memory_mib"] = OOM
        else:
            row["status"] = f"error: {type(error).__name__}: {error}"
            print(
                f"benchkit attention: {implementation} {dtype} N={seq_len} D={head_dim}: {row['status']}",
                file=sys.stderr,
            )
    finally:
        free_memory(device)
    return row


def run_sweep(
    sweep: AttentionSweep,
    device: torch.device | str = "cpu",
    *,
    on_row: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Measure every (dtype, head dim, implementation, sequence length) cell of ``sweep``; one row each.

    Arguments:
        sweep: the cells and how to time them.
        device: where to run; CUDA timings use ``triton.testing.do_bench``.
        on_row: called with the rows measured so far after every cell (the
            command saves them, so that a sweep cut short keeps its results).

    Returns:
        Rows with ``implementation``, ``backend`` (:func:`backend_of`), ``dtype, seq_len,
        head_dim, batch_size, heads, forward_ms, backward_ms, forward_backward_ms`` (float
        or ``"OOM"``), ``peak_memory_mib`` (CUDA only, else None), ``scores_mib`` (the size of
        one (N, N) matrix per head, all heads and batch) and ``status``.
    """
    device = torch.device(device)
    cells = list(itertools.product(sweep.dtypes, sweep.head_dims, sweep.implementations, sweep.seq_lens))
    rows = []
    for dtype, d, impl, n in progress(cells, desc="attention"):
        rows.append(
            measure_cell(
                impl,
                seq_len=n,
                head_dim=d,
                dtype=dtype,
                batch_size=sweep.batch_size,
                heads=sweep.heads,
                device=device,
                reps=sweep.reps,
                compile_backend=sweep.compile_backend,
            )
        )
        if on_row is not None:
            on_row(rows)
    return rows


def plot_sweep(rows: Sequence[dict[str, Any]]) -> dict[str, Figure]:
    """Figures by file name (without suffix): one log-log chart of forward+backward time
    against N per (dtype, head dim), ``attention_<dtype>_d<D>``, and on CUDA one of peak
    memory per dtype at its largest head dim, ``attention_memory_<dtype>_d<D>``. A chart
    with no number to show (every cell failed, or memory off CUDA) is left out."""
    figures = {}

    def number(value: Any) -> float | None:
        return value if isinstance(value, float) else None

    def chart(name: str, subset: list[dict[str, Any]], column: str, title: str, ylabel: str) -> None:
        series = {}
        for impl in dict.fromkeys(r["implementation"] for r in subset):
            cells = [r for r in subset if r["implementation"] == impl]
            label = f"{impl} ({cells[0]['backend']})" if impl == "flashattn2" else impl  # which flashattn2 ran
            series[label] = ([r["seq_len"] for r in cells], [number(r[column]) for r in cells])
        if any(v is not None for _, ys in series.values() for v in ys):
            figures[name] = line_plot(
                series, title=title, xlabel="sequence length N", ylabel=ylabel, log_x=True, log_y=True
            )

    for dtype, head_dim in dict.fromkeys((r["dtype"], r["head_dim"]) for r in rows):
        subset = [r for r in rows if r["dtype"] == dtype and r["head_dim"] == head_dim]
        chart(
            f"attention_{dtype}_d{head_dim}",
            subset,
            "forward_backward_ms",
            f"Attention forward+backward, {dtype}, D={head_dim}",
            "ms",
        )
    for dtype in dict.fromkeys(r["dtype"] for r in rows):
        largest = max(r["head_dim"] for r in rows if r["dtype"] == dtype)
        subset = [r for r in rows if r["dtype"] == dtype and r["head_dim"] == largest]
        chart(
            f"attention_memory_{dtype}_d{largest}",
            subset,
            "peak_memory_mib",
            f"Attention peak memory, {dtype}, D={largest}",
            "MiB",
        )
    return figures
