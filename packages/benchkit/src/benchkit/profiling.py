"""Which kernels (or CPU operators) take the time, phase by phase (``benchkit profile``).

:func:`profile_workload` runs the warm-up steps of a workload untimed, then
profiles the measured steps only with :mod:`torch.profiler`. Each phase of a
step is a :func:`torch.profiler.record_function` range named ``forward``,
``backward`` or ``optimizer`` (and an NVTX range on CUDA, for ``nsys profile``).
Its result holds, per phase, the kernels by GPU time with how often each ran and
the share of matrix-multiply kernels; on a CPU, CPU operators and their self CPU
time. The profiler itself is kept, for a Chrome trace (open it in
https://ui.perfetto.dev or chrome://tracing).

Attribution: the timer synchronizes the device before each phase's range ends,
so every kernel a phase launched also *starts* inside that range's wall-clock
window; a kernel or operator belongs to the phase whose window holds its start.

Example::

    from benchkit.profiling import profile_workload
    from benchkit.workload import WorkloadSettings

    result = profile_workload(WorkloadSettings(size="tiny", context_length=32, warmup=1, steps=2), device="cpu")
    print(result.summary)  # ms per step and matmul share per phase
    result.profiler.export_chrome_trace("/tmp/trace.json")
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import re
from collections.abc import Iterable
from typing import Any

import torch
from torch.profiler import ProfilerActivity

from benchkit.timing import PhaseTimer
from benchkit.training import PHASES
from benchkit.workload import WorkloadSettings

__all__ = ["Profile", "is_matmul", "phase_breakdown", "phase_summary", "profile_workload"]

# Names of matrix-multiply work: cuBLAS/CUTLASS kernels ("gemm", "xmma", "cutlass",
# "nvjet" on Hopper), Triton/Inductor matmul templates ("mm"), and ATen's CPU
# operators (aten::mm, aten::addmm, aten::bmm, aten::baddbmm, aten::matmul).
MATMUL_PATTERN = re.compile(r"gemm|xmma|cutlass|nvjet|matmul|(^|[^a-z])(add|baddb|b)?mm([^a-z]|$)", re.IGNORECASE)
# Fused attention kernels (PyTorch's flash and memory-efficient "fmha_cutlass" kernels,
# flashattn2's Triton kernels) contain matmuls but are attention, not plain GEMMs.
ATTENTION_PATTERN = re.compile(r"fmha|flash|attention|attn", re.IGNORECASE)


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
        summary.append(
            {
                "phase": phase,
                "ms_per_step": total / 1e3 / steps,
                "matmul_pct": 100 * matmul / total if total else None,
                "distinct_names": len(in_phase),
            }
        )
    return summary


@dataclasses.dataclass
class Profile:
    """What :func:`profile_workload` found.

    Attributes:
        rows: :func:`phase_breakdown`'s rows (phase, kernel or operator name, count, time_us, matmul).
        summary: :func:`phase_summary`'s rows (ms per step and matmul share per phase).
        profiler: the finished :class:`torch.profiler.profile`, e.g. for ``export_chrome_trace``.
    """

    rows: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    profiler: torch.profiler.profile


def profile_workload(settings: WorkloadSettings, device: torch.device | str) -> Profile:
    """Build ``settings``' workload on ``device``, run ``settings.warmup`` steps, then profile
    ``settings.steps`` steps of ``settings.mode`` (see the module docstring)."""
    device = torch.device(device)
    workload = settings.workload(device)
    timer = PhaseTimer(device)  # it synchronizes the device at the end of each phase: see the attribution above
    for _ in range(settings.warmup):
        workload.step(settings.mode, timer)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with torch.profiler.profile(activities=activities) as profiler:
        for _ in range(settings.steps):
            workload.step(settings.mode, timer, annotate=True)
    phases = PHASES[settings.mode]
    rows = phase_breakdown(profiler.events(), phases, device_type=device.type)
    return Profile(rows, phase_summary(rows, phases, settings.steps), profiler)
