"""What the Gluon kernels for Hopper GPUs share: where they can run, and how a failed first call turns one off.

The kernels (:mod:`flashattn2._gluon_forward`, :mod:`flashattn2._gluon_backward`) are
written in Gluon (``triton.experimental.gluon``), an experimental Triton API that
changes between releases, so they run only with the releases they were measured with.
This module imports no Gluon: the launch plans ask it first, and import a kernel's
module only for a layout it can run.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import importlib
import itertools
import os
import warnings
from collections.abc import Iterable

import torch
import triton

from flashattn2._inputs import cuda_capability, device_index
from flashattn2._triton_common import KERNELS_INTERPRETED, MAX_INT32

# The Triton releases the kernels were measured with (version prefixes): those torch 2.11 to 2.15 require, 3.6 (2.11),
# 3.7 (2.12 requires 3.7.0, 2.13 3.7.1, which was measured: the two have the same launcher and Gluon TMA sources),
# 3.8 (2.14) and 3.9 (2.15).
TESTED_TRITON = ("3.6.", "3.7.", "3.8.", "3.9.")
HEAD_DIMS = {"forward": (64, 128, 256), "backward": (64, 128, 256)}  # the head dimensions each kernel is laid out for
SWITCHES = {"forward": "FLASHATTN2_HOPPER_FORWARD", "backward": "FLASHATTN2_HOPPER_BACKWARD"}

# A kernel whose first call failed is not tried again in this process.
_failures: dict[str, list[Exception]] = {kind: [] for kind in SWITCHES}


def gluon_module(kind: str, device: torch.device):
    """The module of the ``kind`` kernel (:mod:`flashattn2._gluon_forward` or ``_gluon_backward``) for a
    layout on ``device``; ``None`` off CUDA devices and with a Triton without Gluon (before 3.5). Imported
    by the first CUDA layout, not with flashattn2 (Gluon takes 60 ms to import)."""
    if device.type != "cuda":
        return None
    try:
        return importlib.import_module(f"flashattn2._gluon_{kind}")
    except ImportError:
        return None


def deal_in_order(costs: Iterable[int], programs: int) -> list[int]:
    """Work items for persistent programs, as the Hopper kernels read them: ``programs + 1`` offsets into the
    list, then each program's item numbers. Items (item ``i`` costing ``costs[i]``, in any unit) are dealt in
    order, each to the program with the least cost so far: longest-processing-time scheduling when the order
    is heaviest first. Each program's items follow the order."""
    loads = [(0, p) for p in range(programs)]
    taken: list[list[int]] = [[] for _ in range(programs)]
    for item, cost in enumerate(costs):
        load, p = heapq.heappop(loads)
        taken[p].append(item)
        heapq.heappush(loads, (load + cost, p))
    offsets = list(itertools.accumulate((len(t) for t in taken), initial=programs + 1))
    return offsets + list(itertools.chain.from_iterable(taken))


def reaches(thresholds: tuple[tuple[int, int], ...], q_shape) -> bool:
    """Whether a layout of q shape ``(B, H, N, D)`` reaches one of ``thresholds``' pairs (fewest keys per
    sequence, fewest scores B x H x N^2): where a Hopper kernel was measured faster than the Triton kernels."""
    batch, heads, n, _ = q_shape
    return any(n >= keys and batch * heads * n * n >= scores for keys, scores in thresholds)


def schedule_tensor(table: list[int] | None, device: torch.device) -> torch.Tensor:
    """The int32 device copy of a :func:`deal_in_order` table, or of one 0 where the kernel reads none (``None``).
    Launchers make it on their first call: CPU tests build plans for CUDA devices they never touch."""
    return torch.tensor([0] if table is None else table, dtype=torch.int32, device=device)


@contextlib.contextmanager
def below_thresholds():
    """Within: the kernels run wherever their layout allows, below the measured dispatch thresholds too
    (both kernels' ``THRESHOLDS``), for tests and benchmarks at small shapes. Plans built within keep their
    choice after it; callers clear the plan caches around it."""
    from flashattn2 import _gluon_backward, _gluon_forward  # they import this module

    lifted = {
        (module, "THRESHOLDS"): {(d, causal): ((0, 0),) for d in HEAD_DIMS[kind] for causal in (False, True)}
        for module, kind in ((_gluon_forward, "forward"), (_gluon_backward, "backward"))
    }
    measured = {key: getattr(*key) for key in lifted}
    for (module, name), value in lifted.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for (module, name), value in measured.items():
            setattr(module, name, value)


def enabled(kind: str) -> bool:
    """Whether the ``kind`` kernel ("forward" or "backward") may run: not switched off by its environment
    variable (``FLASHATTN2_HOPPER_FORWARD=0``, ``FLASHATTN2_HOPPER_BACKWARD=0``) and not given up."""
    return not _failures[kind] and os.environ.get(SWITCHES[kind], "1") != "0"


def layout_supported(kind: str, q_shape, k_shape, tma_strides, dtype, device, aligned) -> bool:
    """The conditions the ``kind`` kernel ("forward" or "backward") needs: a Hopper GPU (compute capability
    9.0) with a Triton of :data:`TESTED_TRITON`, fp16 or bf16, a head dim in its :data:`HEAD_DIMS`, as many keys as
    queries, every pointer 16-byte aligned (``aligned is True``), ``tma_strides`` (those of the tensors read
    by TMA) with unit last stride and 16-byte others, and 32-bit offsets for ``B * H * N * D``."""
    if not triton.__version__.startswith(TESTED_TRITON):
        return False
    if device.type != "cuda" or KERNELS_INTERPRETED or torch.version.hip is not None:
        return False
    batch, heads, n, head_dim = q_shape
    if head_dim not in HEAD_DIMS[kind] or dtype not in (torch.float16, torch.bfloat16) or k_shape[2] != n:
        return False
    if aligned is not True or cuda_capability(device) != (9, 0):
        return False
    if batch * heads * n * head_dim > MAX_INT32:
        return False
    return all(stride[-1] == 1 and all(s % 8 == 0 for s in stride[:-1]) for stride in tma_strides)  # 8 x 2 bytes


@functools.cache
def _device_properties(index: int):
    return torch.cuda.get_device_properties(index)


def multiprocessors(device: torch.device) -> int:
    """The device's multiprocessors (132 on an H100 SXM)."""
    return _device_properties(device_index(device)).multi_processor_count


def l2_cache_bytes(device: torch.device) -> int:
    """The device's L2 cache, in bytes (50 MiB on an H100 SXM)."""
    return _device_properties(device_index(device)).L2_cache_size


def fits_in_l2(nbytes: int, share: float, device: torch.device) -> bool:
    """Whether ``nbytes`` take at most ``share`` of the device's L2 cache: causal launches order their work across
    all (batch, head) pairs only where what those read again stays there."""
    return nbytes <= share * l2_cache_bytes(device)


def usable_multiprocessors(device: torch.device) -> int:
    """The device's multiprocessors, or the share of them an MPS client is limited to
    (``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``): the persistent kernels' grid."""
    percentage = os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "100")
    try:
        share = min(float(percentage), 100.0) / 100
    except ValueError:  # not a number: MPS would refuse it; assume the least
        share = 0.0
    return int(multiprocessors(device) * share)


def run_or_give_up(kind: str, launcher, *args) -> bool:
    """Call ``launcher(*args)``; ``False`` if its first call failed to compile or launch, after which the
    ``kind`` kernel is off for this process (with one warning) and the caller runs the Triton kernels.
    A failure once ``launcher.launched`` is set, or running out of memory, is raised."""
    try:
        launcher(*args)
    except Exception as error:  # Gluon is experimental: a failure to build a kernel must not stop training
        if launcher.launched or isinstance(error, torch.OutOfMemoryError):
            raise
        if not _failures[kind]:
            warnings.warn(
                f"flashattn2: the Hopper {kind} kernel failed ({type(error).__name__}: {error}); using the Triton "
                f"kernels for the rest of this process ({SWITCHES[kind]}=0 skips the attempt)",
                RuntimeWarning,
                stacklevel=3,
            )
        _failures[kind].append(error)
        return False
    return True
