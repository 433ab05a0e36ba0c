"""``benchkit attention``: attention implementations side by side across sequence lengths and head dims.

Implementations (all causal, inputs q, k, v of shape (B, H, N, D)):

- ``naive``: ``softmax(q k^T / sqrt(D) + causal mask) v``, materializing the
  (N, N) scores per head (the reference model's ``naive`` backend);
- ``naive-compiled``: the same function through :func:`torch.compile`;
- ``sdpa``: :func:`torch.nn.functional.scaled_dot_product_attention` (PyTorch
  picks its kernel: FlashAttention, memory-efficient or cuDNN on a GPU);
- ``flashattn2``: this repository's FlashAttention-2 kernel (imported lazily;
  on a CPU it runs the Triton interpreter when ``TRITON_INTERPRET=1``, its tiled
  PyTorch implementation otherwise).

For each (implementation, dtype, N, D) cell the sweep times the forward pass
(with autograd recording, as in training), the backward pass alone (from a
retained graph) and forward+backward, in milliseconds: the median of
:func:`triton.testing.do_bench` on CUDA, the median of ``--reps`` runs timed by
:class:`benchkit.timing.PhaseTimer` on a CPU. On CUDA it also measures the peak
memory one forward+backward allocates beyond q, k, v and the output gradient
(``torch.cuda.max_memory_allocated``; the output and dq, dk, dv included), next to the O(N^2) accounting: one (N, N)
matrix per head, ``B*H*N^2*bytes(dtype)``; the naive implementation keeps the
softmax probabilities (one such matrix) and the boolean mask (N^2 bytes) for
backward and holds up to three score-sized matrices at once in forward, while
FlashAttention-2 keeps only O(B*H*N*D).

A pass that runs out of GPU memory is recorded as ``"OOM"`` and the sweep goes
on. Any other failure of a cell is recorded in its ``status`` and printed, the
sweep goes on, and the command exits with status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch._functorch.config

from benchkit import model
from benchkit.argtypes import positive_int
from benchkit.plot import line_plot
from benchkit.report import add_output_arguments, format_table, progress, write_results
from benchkit.timing import PhaseTimer
from benchkit.workload import add_device_argument, free_memory, resolve_device

HELP = "naive / compiled / SDPA / flashattn2 attention: forward and backward time and peak memory"
EXAMPLES = """\
  benchkit attention                                   # GPU: N 128..65536 x D 16..128 x bf16/fp32; CPU: tiny
  benchkit attention --seq-len 1024 4096 16384 --head-dim 64 128 --dtype bf16
  benchkit attention --impl sdpa flashattn2 --heads 16 --seq-len 16384 --head-dim 64
  benchkit attention --device cpu --seq-len 64 128 --head-dim 16 --reps 3
"""

IMPLEMENTATIONS = ("naive", "naive-compiled", "sdpa", "flashattn2")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
PASSES = {"forward": "forward_ms", "backward": "backward_ms", "forward+backward": "forward_backward_ms"}
OOM = "OOM"

# Defaults: the sweep of issue 3 on a GPU (batch 1, causal, N 128...65536, D 16...128,
# bf16 and fp32), and a few small cells that finish in seconds on a CPU.
GPU_DEFAULTS = dict(seq_lens=[2**k for k in range(7, 17)], head_dims=[16, 32, 64, 128], dtypes=["bf16", "fp32"])
CPU_DEFAULTS = dict(seq_lens=[64, 128, 256], head_dims=[16, 64], dtypes=["fp32"])
DEFAULT_HEADS = 16  # the head count of issue 3's headline shape (B=1, H=16, N=16384, D=64)
MIB = 2**20


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


def _measure_passes(row: dict[str, Any], implementation: str, *, device: torch.device, reps: int,
                    compile_backend: str) -> None:
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
    row["backward_ms"] = _median_ms(lambda: out.backward(grad_out, retain_graph=True), device, inputs, reps)
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
    torch_dtype = DTYPES[dtype]
    row: dict[str, Any] = {
        "implementation": implementation, "dtype": dtype, "seq_len": seq_len, "head_dim": head_dim,
        "batch_size": batch_size, "heads": heads,
        **{column: None for column in PASSES.values()},
        "peak_memory_mib": None,
        "scores_mib": batch_size * heads * seq_len**2 * torch_dtype.itemsize / MIB,
        "status": "ok",
    }
    try:
        with _retainable_backward(implementation):
            _measure_passes(row, implementation, device=device, reps=reps, compile_backend=compile_backend)
    except Exception as error:  # noqa: BLE001 - recorded in the row, printed, and reflected in the exit code
        if isinstance(error, torch.OutOfMemoryError):
            row["status"] = OOM
            for column in PASSES.values():
                if row[column] is None:
                    row[column] = OOM
            if row["peak_memory_mib"] is None and device.type == "cuda":
                row["peak_memory_mib"] = OOM
        else:
            row["status"] = f"error: {type(error).__name__}: {error}"
            print(f"benchkit attention: {implementation} {dtype} N={seq_len} D={head_dim}: {row['status']}",
                  file=sys.stderr)
    finally:
        free_memory(device)
    return row


def run_sweep(
    *,
    seq_lens: Sequence[int],
    head_dims: Sequence[int],
    dtypes: Sequence[str],
    implementations: Sequence[str] = IMPLEMENTATIONS,
    batch_size: int = 1,
    heads: int = DEFAULT_HEADS,
    device: torch.device | str = "cpu",
    reps: int = 3,
    compile_backend: str = "inductor",
    on_row: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Measure every (dtype, head dim, implementation, sequence length) cell; one row each.

    Arguments:
        seq_lens, head_dims: N and D values (positive ints).
        dtypes: names in :data:`DTYPES`.
        implementations: names in :data:`IMPLEMENTATIONS`.
        batch_size, heads: B and H of the (B, H, N, D) inputs.
        device: where to run; CUDA timings use ``triton.testing.do_bench``.
        reps: timed runs per pass on a CPU (the median is reported).
        compile_backend: :func:`torch.compile` backend of ``naive-compiled``.
        on_row: called with the rows measured so far after every cell (the
            command saves them, so that a sweep cut short keeps its results).

    Returns:
        Rows with ``implementation, dtype, seq_len, head_dim, batch_size, heads,
        forward_ms, backward_ms, forward_backward_ms`` (float or ``"OOM"``),
        ``peak_memory_mib`` (CUDA only, else None), ``scores_mib`` (the size of one
        (N, N) matrix per head, all heads and batch) and ``status``.
    """
    for name, values in (("seq_lens", seq_lens), ("head_dims", head_dims)):
        if not values or not all(isinstance(v, int) and v > 0 for v in values):
            raise ValueError(f"{name} must be a non-empty sequence of positive ints, got {values!r}")
    for name, values, allowed in (("dtypes", dtypes, DTYPES), ("implementations", implementations, IMPLEMENTATIONS)):
        unknown = [v for v in values if v not in allowed]
        if not values or unknown:
            raise ValueError(f"{name} must be a non-empty sequence of {tuple(allowed)}, got {values!r}")
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    device = torch.device(device)
    cells = list(itertools.product(dtypes, head_dims, implementations, seq_lens))
    rows = []
    for dtype, d, impl, n in progress(cells, desc="attention"):
        rows.append(measure_cell(impl, seq_len=n, head_dim=d, dtype=dtype, batch_size=batch_size, heads=heads,
                                 device=device, reps=reps, compile_backend=compile_backend))
        if on_row is not None:
            on_row(rows)
    return rows


def plot_sweep(rows: Sequence[dict[str, Any]], out_dir: str | Path) -> list[Path]:
    """One log-log chart of forward+backward time against N per (dtype, head dim), and on
    CUDA one of peak memory per dtype at its largest head dim; returns the PNG paths."""
    out_dir = Path(out_dir)
    paths = []

    def number(value: Any) -> float | None:
        return value if isinstance(value, float) else None

    def chart(path: Path, subset: list[dict[str, Any]], column: str, title: str, ylabel: str) -> None:
        series = {}
        for impl in dict.fromkeys(r["implementation"] for r in subset):
            cells = [r for r in subset if r["implementation"] == impl]
            series[impl] = ([r["seq_len"] for r in cells], [number(r[column]) for r in cells])
        if any(v is not None for _, ys in series.values() for v in ys):
            paths.append(line_plot(path, series, title=title, xlabel="sequence length N", ylabel=ylabel,
                                   log_x=True, log_y=True))

    for dtype, head_dim in dict.fromkeys((r["dtype"], r["head_dim"]) for r in rows):
        subset = [r for r in rows if r["dtype"] == dtype and r["head_dim"] == head_dim]
        chart(out_dir / f"attention_{dtype}_d{head_dim}.png", subset, "forward_backward_ms",
              f"Attention forward+backward, {dtype}, D={head_dim}", "ms")
    for dtype in dict.fromkeys(r["dtype"] for r in rows):
        largest = max(r["head_dim"] for r in rows if r["dtype"] == dtype)
        subset = [r for r in rows if r["dtype"] == dtype and r["head_dim"] == largest]
        chart(out_dir / f"attention_memory_{dtype}_d{largest}.png", subset, "peak_memory_mib",
              f"Attention peak memory, {dtype}, D={largest}", "MiB")
    return paths


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seq-len", type=positive_int, nargs="+", metavar="N",
                        help="sequence lengths (default: 128 ... 65536 on a GPU, 64 128 256 on a CPU)")
    parser.add_argument("--head-dim", type=positive_int, nargs="+", metavar="D",
                        help="head dimensions (default: 16 32 64 128 on a GPU, 16 64 on a CPU)")
    parser.add_argument("--dtype", choices=list(DTYPES), nargs="+",
                        help="dtypes (default: bf16 fp32 on a GPU, fp32 on a CPU)")
    parser.add_argument("--impl", choices=IMPLEMENTATIONS, nargs="+", default=list(IMPLEMENTATIONS),
                        help="implementations (default: all)")
    parser.add_argument("--batch-size", type=positive_int, default=1, metavar="B", help="batch (default: 1)")
    parser.add_argument("--heads", type=positive_int, default=DEFAULT_HEADS, metavar="H",
                        help=f"heads (default: {DEFAULT_HEADS})")
    parser.add_argument("--reps", type=positive_int, default=3, help="timed runs per pass on a CPU (default: 3)")
    parser.add_argument("--compile-backend", default="inductor",
                        help="torch.compile backend for naive-compiled (default: inductor)")
    add_device_argument(parser)
    add_output_arguments(parser)


STATUS_WIDTH = 48  # characters of a cell's status shown in the table; the JSON and stderr have it all


def _display(row: dict[str, Any]) -> dict[str, Any]:
    shown = {k: v for k, v in row.items() if k not in ("batch_size", "heads")}
    if len(shown["status"]) > STATUS_WIDTH:
        shown["status"] = shown["status"][: STATUS_WIDTH - 3] + "..."
    return shown


def run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    defaults = GPU_DEFAULTS if device.type == "cuda" else CPU_DEFAULTS
    meta = {"batch_size": args.batch_size, "heads": args.heads, "causal": True, "device": str(device),
            "timer": "triton.testing.do_bench median" if device.type == "cuda" else f"median of {args.reps} runs"}

    def save_partial(rows_so_far):
        # A sweep stopped part-way (time limit, Ctrl-C) leaves the cells it finished (as benchkit ddp does).
        write_results(args.out, "attention.partial", rows_so_far, meta=meta)

    rows = run_sweep(
        seq_lens=args.seq_len or defaults["seq_lens"],
        head_dims=args.head_dim or defaults["head_dims"],
        dtypes=args.dtype or defaults["dtypes"],
        implementations=args.impl,
        batch_size=args.batch_size,
        heads=args.heads,
        device=device,
        reps=args.reps,
        compile_backend=args.compile_backend,
        on_row=save_partial,
    )
    print(f"causal attention, B={args.batch_size}, H={args.heads}, on {device}")
    print(format_table([_display(r) for r in rows]))
    path = write_results(args.out, "attention", rows, meta=meta, csv=args.csv)
    plots = plot_sweep(rows, args.out)
    print(f"\nwrote {path}" + "".join(f", {p}" for p in plots))
    failed = [r for r in rows if r["status"].startswith("error")]
    return 1 if failed else 0
