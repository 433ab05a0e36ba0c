"""``benchkit attention``: attention implementations side by side (:mod:`benchkit.attention`).

Exits with status 1 if a cell failed other than by running out of memory (its row says how).
"""

from __future__ import annotations

import argparse
from typing import Any

from benchkit.argtypes import positive_int
from benchkit.attention import (
    BACKEND_NOTES,
    DEFAULT_HEADS,
    DTYPE_NAMES,
    IMPLEMENTATIONS,
    AttentionSweep,
    default_sweep,
    plot_sweep,
    run_sweep,
)
from benchkit.devices import resolve_device
from benchkit.options import add_device_argument, add_output_arguments
from benchkit.plot import save_figure
from benchkit.report import format_table, write_results

HELP = "naive / compiled / SDPA / flashattn2 attention: forward and backward time and peak memory"
EXAMPLES = """\
  benchkit attention                                   # GPU: N 128..65536 x D 16..128 x bf16/fp32; CPU: tiny
  benchkit attention --seq-len 1024 4096 16384 --head-dim 64 128 --dtype bf16
  benchkit attention --impl sdpa flashattn2 --heads 16 --seq-len 16384 --head-dim 64
  benchkit attention --device cpu --seq-len 64 128 --head-dim 16 --reps 3 --format svg
"""
STATUS_WIDTH = 48  # characters of a cell's status shown in the table; the JSON and stderr have it all


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seq-len",
        type=positive_int,
        nargs="+",
        metavar="N",
        help="sequence lengths (default: 128 ... 65536 on a GPU, 64 128 256 on a CPU)",
    )
    parser.add_argument(
        "--head-dim",
        type=positive_int,
        nargs="+",
        metavar="D",
        help="head dimensions (default: 16 32 64 128 on a GPU, 16 64 on a CPU)",
    )
    parser.add_argument(
        "--dtype", choices=DTYPE_NAMES, nargs="+", help="dtypes (default: bf16 fp32 on a GPU, fp32 on a CPU)"
    )
    parser.add_argument(
        "--impl",
        choices=IMPLEMENTATIONS,
        nargs="+",
        default=list(IMPLEMENTATIONS),
        help="implementations (default: all)",
    )
    parser.add_argument("--batch-size", type=positive_int, default=1, metavar="B", help="batch (default: 1)")
    parser.add_argument(
        "--heads", type=positive_int, default=DEFAULT_HEADS, metavar="H", help=f"heads (default: {DEFAULT_HEADS})"
    )
    parser.add_argument("--reps", type=positive_int, default=3, help="timed runs per pass on a CPU (default: 3)")
    parser.add_argument(
        "--compile-backend", default="inductor", help="torch.compile backend for naive-compiled (default: inductor)"
    )
    add_device_argument(parser)
    add_output_arguments(parser, figures=True)


def _display(row: dict[str, Any]) -> dict[str, Any]:
    shown = {k: v for k, v in row.items() if k not in ("batch_size", "heads")}
    if len(shown["status"]) > STATUS_WIDTH:
        shown["status"] = shown["status"][: STATUS_WIDTH - 3] + "..."
    return shown


def run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    defaults = default_sweep(device)
    sweep = AttentionSweep(
        seq_lens=tuple(args.seq_len or defaults.seq_lens),
        head_dims=tuple(args.head_dim or defaults.head_dims),
        dtypes=tuple(args.dtype or defaults.dtypes),
        implementations=tuple(args.impl),
        batch_size=args.batch_size,
        heads=args.heads,
        reps=args.reps,
        compile_backend=args.compile_backend,
    )
    meta = {
        "batch_size": args.batch_size,
        "heads": args.heads,
        "causal": True,
        "device": str(device),
        "timer": "triton.testing.do_bench median" if device.type == "cuda" else f"median of {args.reps} runs",
    }

    def save_partial(rows_so_far: list[dict[str, Any]]) -> None:
        # A sweep stopped part-way (time limit, Ctrl-C) leaves the cells it finished (as benchkit ddp does).
        write_results(args.out, "attention.partial", rows_so_far, meta=meta)

    rows = run_sweep(sweep, device, on_row=save_partial)
    print(f"causal attention, B={args.batch_size}, H={args.heads}, on {device}")
    print(format_table([_display(r) for r in rows]))
    for backend in dict.fromkeys(r["backend"] for r in rows if r["implementation"] == "flashattn2"):
        print(f"flashattn2 ran as {backend}: {BACKEND_NOTES.get(backend, 'see the rows')}")
    path = write_results(args.out, "attention", rows, meta=meta, csv=args.csv)
    plots = [save_figure(figure, args.out, name, args.format) for name, figure in plot_sweep(rows).items()]
    print(f"\nwrote {path}" + "".join(f", {p}" for p in plots))
    return 1 if any(r["status"].startswith("error") for r in rows) else 0
