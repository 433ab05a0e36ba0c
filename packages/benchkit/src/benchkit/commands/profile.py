"""``benchkit profile``: which kernels (or CPU operators) take the time, phase by phase (:mod:`benchkit.profiling`).

Saves a Chrome trace of the profiled steps (``trace.json``) and ``profile.json``, and
prints per phase the top kernels with how often each ran, and the matmul share.
"""

from __future__ import annotations

import argparse

from benchkit.argtypes import non_negative_int, positive_int
from benchkit.devices import device_name, resolve_device
from benchkit.options import add_output_arguments, add_workload_arguments, default_sizes
from benchkit.profiling import profile_workload
from benchkit.report import format_table, options_for_json, write_results
from benchkit.training import MODES
from benchkit.workload import GPU_SIZES, WorkloadSettings

HELP = "torch.profiler over the measured steps: top kernels per phase, matmul share, Chrome trace"
EXAMPLES = """\
  benchkit profile --size tiny --steps 3                       # CPU: operators by self CPU time
  benchkit profile --size small --context-length 256 --mode train-step --top 15
  nsys profile -o small benchkit profile --size small          # NVTX ranges forward/backward/optimizer
"""
NAME_WIDTH = 70  # characters of a kernel's name in the table: templated names run to hundreds


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_workload_arguments(parser, sweep=False, gpu_sizes=GPU_SIZES)
    parser.add_argument("--mode", choices=MODES, default="train-step", help="what one step runs (default: train-step)")
    parser.add_argument("--warmup", type=non_negative_int, default=5, help="unprofiled steps first (default: 5)")
    parser.add_argument("--steps", type=positive_int, default=10, help="profiled steps (default: 10)")
    parser.add_argument("--top", type=positive_int, default=10, help="kernels listed per phase (default: 10)")
    add_output_arguments(parser)


def _shorten(name: str) -> str:
    return name if len(name) <= NAME_WIDTH else name[: NAME_WIDTH - 3] + "..."


def run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    size = args.size or default_sizes(device, GPU_SIZES)[0]
    result = profile_workload(
        WorkloadSettings(
            size=size,
            context_length=args.context_length,
            batch_size=args.batch_size,
            mode=args.mode,
            precision=args.precision,
            attention=args.attention,
            compile=args.compile,
            warmup=args.warmup,
            steps=args.steps,
        ),
        device,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    trace = args.out / "trace.json"
    result.profiler.export_chrome_trace(str(trace))

    what = "GPU kernels by GPU time" if device.type == "cuda" else "CPU operators by self CPU time"
    print(
        f"device: {device_name()}; {size}, context {args.context_length}, batch {args.batch_size}, "
        f"{args.precision}, {args.mode}; {args.steps} profiled steps after {args.warmup} warm-up"
    )
    for phase in [s["phase"] for s in result.summary]:
        in_phase = [r for r in result.rows if r["phase"] == phase]
        total = sum(r["time_us"] for r in in_phase)
        print(f"\n{phase}: top {len(in_phase[: args.top])} {what}")
        print(
            format_table(
                [
                    {
                        "name": _shorten(r["name"]),
                        "calls": r["count"],
                        "calls/step": r["count"] / args.steps,
                        "ms/step": r["time_us"] / 1e3 / args.steps,
                        "share_%": 100 * r["time_us"] / total,
                        "matmul": r["matmul"],
                    }
                    for r in in_phase[: args.top]
                ]
            )
        )
    print("\nper phase (matmul: names matching benchkit.profiling.MATMUL_PATTERN)")
    print(format_table(result.summary))
    meta = {**options_for_json(args), "size": size, "summary": result.summary, "trace": str(trace)}
    path = write_results(args.out, "profile", result.rows, meta=meta, csv=args.csv)
    print(f"results: {path}\nChrome trace: {trace}")
    return 0
