"""``benchkit accounting``: memory and communication of large-scale training, on paper (:mod:`benchkit.accounting`)."""

from __future__ import annotations

import argparse

from benchkit.accounting import DEVICES, MODEL_NAMES, AccountingSettings, run_accounting
from benchkit.argtypes import positive_float, positive_int
from benchkit.options import add_output_arguments
from benchkit.plot import save_figure
from benchkit.report import format_table, write_results

HELP = "memory and communication of large-scale training: per-device memory, compute vs communication time"
EXAMPLES = """\
  benchkit accounting                                  # FFN-only XXL model, H100 and TPU v5p, fsdp 16 x tp 4
  benchkit accounting --model 2.7B --hardware h100 --dp 8 --fsdp 1 --tp 1 --batch-size 64 --seq-len 1024
  benchkit accounting --model xxl-ffn --fsdp 64 --tp 1 --hardware tpu-v5p
  benchkit accounting --hardware h100 --flops 4e14 --link-bandwidth 1e11   # your own device
"""

MEMORY_COLUMNS = [
    "device",
    "master_fp32_gb",
    "compute_bf16_gb",
    "grads_fp32_gb",
    "adamw_m_fp32_gb",
    "adamw_v_fp32_gb",
    "activations_gb",
    "total_gb",
    "fits",
    "devices_for_state",
]
TIME_COLUMNS = ["device", "compute_ms", "comm_ms", "bound_by", "compute_bound_tokens", "compute_bound_batch"]
DEFAULTS = AccountingSettings()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        choices=MODEL_NAMES,
        default=DEFAULTS.model,
        help=f"FFN-only XXL model or a reference Transformer size (default: {DEFAULTS.model})",
    )
    parser.add_argument(
        "--hardware",
        choices=list(DEVICES),
        nargs="+",
        default=list(DEFAULTS.hardware),
        help="device presets (default: all)",
    )
    for name, what in (
        ("dp", "data parallel"),
        ("fsdp", "fully sharded data parallel"),
        ("tp", "tensor parallel"),
        ("pp", "pipeline parallel"),
    ):
        parser.add_argument(
            f"--{name}",
            type=positive_int,
            default=getattr(DEFAULTS, name),
            metavar="N",
            help=f"{what} degree (default: {getattr(DEFAULTS, name)})",
        )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=DEFAULTS.batch_size,
        metavar="B",
        help=f"global batch, sequences per step (default: {DEFAULTS.batch_size})",
    )
    parser.add_argument(
        "--seq-len",
        type=positive_int,
        default=DEFAULTS.seq_len,
        metavar="T",
        help=f"tokens per sequence (default: {DEFAULTS.seq_len})",
    )
    parser.add_argument("--flops", type=positive_float, metavar="FLOP/S", help="override the preset's FLOP/s")
    parser.add_argument("--memory-gb", type=positive_float, metavar="GB", help="override the preset's memory")
    parser.add_argument(
        "--link-bandwidth",
        type=positive_float,
        metavar="BYTES/S",
        help="override the preset's link bandwidth (bytes/s each direction)",
    )
    add_output_arguments(parser, figures=True)


def run(args: argparse.Namespace) -> int:
    result = run_accounting(
        AccountingSettings(
            model=args.model,
            hardware=tuple(args.hardware),
            dp=args.dp,
            fsdp=args.fsdp,
            tp=args.tp,
            pp=args.pp,
            batch_size=args.batch_size,
            seq_len=args.seq_len,
            flops=args.flops,
            memory_gb=args.memory_gb,
            link_bandwidth=args.link_bandwidth,
        )
    )
    model, par = result.model, result.parallelism
    print(
        f"{model.name}: {model.parameters:,} parameters; {par.devices} devices "
        f"(dp {par.dp} x fsdp {par.fsdp} x tp {par.tp} x pp {par.pp}); "
        f"{args.batch_size} x {args.seq_len} tokens per step"
    )
    print(format_table(result.rows, MEMORY_COLUMNS))
    print()
    print(format_table(result.rows, TIME_COLUMNS))
    path = write_results(args.out, "accounting", result.rows, meta=result.meta(), csv=args.csv)
    plot = save_figure(result.figure(), args.out, "accounting", args.format)
    print(f"\nwrote {path} and {plot}")
    return 0
