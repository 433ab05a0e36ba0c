"""``benchkit profile``: which kernels (or CPU operators) take the time, phase by phase.

Runs ``--warmup`` untimed steps, then profiles the ``--steps`` measured steps
only with :mod:`torch.profiler`. Each phase of a step is a
:func:`torch.profiler.record_function` range named ``forward``, ``backward`` or
``optimizer`` (and an NVTX range on CUDA, for ``nsys profile``). Saves a Chrome
trace (open in https://ui.perfetto.dev or chrome://tracing) and prints, per
phase, the top kernels by GPU time with how often each ran, and the share of
matrix-multiply kernels. On a CPU the same is done with CPU operators and their
self CPU time.

Attribution: the timer synchronizes the device before each phase's range ends,
so every kernel a phase launched also *starts* inside that range's wall-clock
window; a kernel or operator belongs to the phase whose window holds its start.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import re
from typing import Any, Iterable

import torch
from torch.profiler import ProfilerActivity

from benchkit.argtypes import non_negative_int, positive_int
from benchkit.model import model_config
from benchkit.report import add_output_arguments, device_name, format_table, options_for_json, write_results
from benchkit.timing import PhaseTimer
from benchkit.workload import (
    MODES,
    PHASES,
    Workload,
    add_workload_arguments,
    default_sizes,
    resolve_device,
)

HELP = "torch.profiler over the measured steps: top kernels per phase, matmul share, Chrome trace"
EXAMPLES = """\
  benchkit profile --size tiny --steps 3                       # CPU: operators by self CPU time
  benchkit profile --size small --context-length 256 --mode train-step --top 15
  nsys profile -o small benchkit profile --size small          # NVTX ranges forward/backward/optimizer
"""

# Names of matrix-multiply work: cuBLAS/CUTLASS kernels ("gemm", "xmma", "cutlass",
# "nvjet" on Hopper), Triton/Inductor matmul templates ("mm"), and ATen's CPU
# operators (aten::mm, aten::addmm, aten::bmm, aten::baddbmm, aten::matmul).
MATMUL_PATTERN = re.compile(r"gemm|xmma|cutlass|nvjet|matmul|(^|[^a-z])(add|baddb|b)?mm([^a-z]|$)", re.IGNORECASE)
# Fused attention kernels (PyTorch's flash and memory-efficient "fmha_cutlass" kernels,
# flashattn2's Triton kernels) contain matmuls but are attention, not plain GEMMs.
ATTENTION_PATTERN = re.compile(r"fmha|flash|attention|attn", re.IGNORECASE)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_workload_arguments(parser, sweep=False)
    parser.add_argument("--mode", choices=MODES, default="train-step", help="what one step runs (default: train-step)")
    parser.add_argument("--warmup", type=non_negative_int, default=5, help="unprofiled steps first (default: 5)")
    parser.add_argument("--steps", type=positive_int, default=10, help="profiled steps (default: 10)")
    parser.add_argument("--top", type=positive_int, default=10, help="kernels listed per phase (default: 10)")
    add_output_arguments(parser)


def is_matmul(name: str) -> bool:
    """Whether a kernel or operator name is plain matrix-multiply work: it matches
    MATMUL_PATTERN and not ATTENTION_PATTERN."""
    return MATMUL_PATTERN.search(name) is not None and ATTENTION_PATTERN.search(name) is None


def phase_breakdown(events: Iterable[Any], phases: Iterable[str], *, device_type: str) -> list[dict[str, Any]]:
    """Time per (phase, kernel name) from profiler events.

    Arguments:
        events: :class:`torch.autograd.profiler_util.FunctionEvent` objects
            (``prof.events()``), including the phase ranges themselves.
        phases: the names of the phase ranges.
        device_type: ``"cuda"``: count GPU kernels by their duration;
            ``"cpu"``: count CPU operators by their self CPU time.

    Returns rows ``{"phase", "name", "count", "time_us", "matmul"}`` sorted by
    phase (in ``phases`` order) then by decreasing time.
    """
    phases = list(phases)
    events = list(events)
    windows = sorted(
        (e.time_range.start, e.time_range.end, e.name)
        for e in events
        if e.name in phases and e.device_type == torch.autograd.DeviceType.CPU
    )
    starts = [w[0] for w in windows]
    totals: dict[tuple[str, str], list[float]] = collections.defaultdict(lambda: [0, 0.0])
    want = torch.autograd.DeviceType.CUDA if device_type == "cuda" else torch.autograd.DeviceType.CPU
    for event in events:
        # On the GPU timeline a record_function range (e.g. the "Optimizer.step#AdamW.step"
        # range torch.optim opens) also appears as a GPU-side annotation spanning the kernels
        # launched inside it; counting it would count those kernels twice. Kineto flags such
        # events is_user_annotation (torch's own key_averages table skips them likewise).
        gpu_annotation = want == torch.autograd.DeviceType.CUDA and event.is_user_annotation
        if event.device_type != want or gpu_annotation or event.name in phases or event.name.startswith("ProfilerStep"):
            continue
        i = bisect.bisect_right(starts, event.time_range.start) - 1
        if i < 0 or event.time_range.start > windows[i][1]:
            continue  # outside every phase (e.g. zero_grad between steps)
        duration = event.time_range.elapsed_us() if device_type == "cuda" else event.self_cpu_time_total
        entry = totals[(windows[i][2], event.name)]
        entry[0] += 1
        entry[1] += duration
    rows = [
        {"phase": phase, "name": name, "count": count, "time_us": time_us, "matmul": is_matmul(name)}
        for (phase, name), (count, time_us) in totals.items()
    ]
    return sorted(rows, key=lambda r: (phases.index(r["phase"]), -r["time_us"]))


def phase_summary(rows: list[dict[str, Any]], phases: Iterable[str], steps: int) -> list[dict[str, Any]]:
    """Per phase: attributed time per step (ms), and the matmul share of it."""
    summary = []
    for phase in phases:
        in_phase = [r for r in rows if r["phase"] == phase]
        total = sum(r["time_us"] for r in in_phase)
        matmul = sum(r["time_us"] for r in in_phase if r["matmul"])
        summary.append({
            "phase": phase, "ms_per_step": total / 1e3 / steps, "matmul_pct": 100 * matmul / total if total else None,
            "distinct_names": len(in_phase),
        })
    return summary


def run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    size = args.size or default_sizes(device)[0]
    config = model_config(size, args.context_length, attention=args.attention)
    workload = Workload(config, batch_size=args.batch_size, device=device, precision=args.precision, compile=args.compile)
    timer = PhaseTimer(device)
    for _ in range(args.warmup):
        workload.step(args.mode, timer)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with torch.profiler.profile(activities=activities) as profiler:
        for _ in range(args.steps):
            workload.step(args.mode, timer, annotate=True)
    args.out.mkdir(parents=True, exist_ok=True)
    trace = args.out / "trace.json"
    profiler.export_chrome_trace(str(trace))

    phases = PHASES[args.mode]
    rows = phase_breakdown(profiler.events(), phases, device_type=device.type)
    summary = phase_summary(rows, phases, args.steps)
    what = "GPU kernels by GPU time" if device.type == "cuda" else "CPU operators by self CPU time"
    print(f"device: {device_name()}; {size}, context {args.context_length}, batch {args.batch_size}, "
          f"{args.precision}, {args.mode}; {args.steps} profiled steps after {args.warmup} warm-up")
    for phase in phases:
        top = [r for r in rows if r["phase"] == phase][: args.top]
        total = sum(r["time_us"] for r in rows if r["phase"] == phase)
        print(f"\n{phase}: top {len(top)} {what}")
        print(format_table([
            {"name": _shorten(r["name"]), "calls": r["count"], "calls/step": r["count"] / args.steps,
             "ms/step": r["time_us"] / 1e3 / args.steps, "share_%": 100 * r["time_us"] / total, "matmul": r["matmul"]}
            for r in top
        ]))
    print("\nper phase (matmul: names matching benchkit.commands.profile.MATMUL_PATTERN)")
    print(format_table(summary))
    path = write_results(args.out, "profile", rows, meta={**options_for_json(args), "size": size, "summary": summary,
                                                          "trace": str(trace)}, csv=args.csv)
    print(f"results: {path}\nChrome trace: {trace}")
    return 0


def _shorten(name: str, width: int = 70) -> str:
    """Kernel names can be hundreds of characters (templates); keep the table readable."""
    return name if len(name) <= width else name[: width - 3] + "..."
