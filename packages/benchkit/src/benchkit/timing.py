"""Timing: summary statistics of samples and a phase timer that waits for the device.

GPU work is asynchronous: a kernel launch returns before the kernel has run, so
a wall-clock reading taken right after a launch measures the launch only. The
:class:`PhaseTimer` therefore synchronizes the device at the end of every timed
phase. On CUDA it times with CUDA events (the GPU's own clock, in the stream's
order); elsewhere with :func:`timeit.default_timer`, or any clock you inject.

Example::

    from benchkit.timing import PhaseTimer

    timer = PhaseTimer("cpu")
    for _ in range(3):
        with timer.phase("forward"):
            sum(range(10_000))
    stats = timer.summary()["forward"]  # Stats over 3 samples, in seconds
    print(f"{stats.mean * 1e3:.3f} ms ± {stats.std * 1e3:.3f} ms")
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import statistics
import timeit
from collections.abc import Callable, Iterator, Sequence

import torch

__all__ = ["PhaseTimer", "Stats", "summarize", "synchronize"]


@dataclasses.dataclass(frozen=True)
class Stats:
    """Summary of timing samples, all in seconds.

    ``std`` is the sample standard deviation (n - 1 in the denominator), 0.0 for a
    single sample.
    """

    mean: float
    std: float
    median: float
    min: float
    max: float


def summarize(samples: Sequence[float]) -> Stats:
    """:class:`Stats` of a non-empty sequence of durations in seconds."""
    values = [float(s) for s in samples]
    if not values:
        raise ValueError("summarize needs at least one sample, got an empty sequence")
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"summarize needs finite samples, got {values}")
    return Stats(
        mean=statistics.fmean(values),
        std=statistics.stdev(values) if len(values) > 1 else 0.0,
        median=statistics.median(values),
        min=min(values),
        max=max(values),
    )


def synchronize(device: torch.device | str) -> None:
    """Wait until all work queued on ``device`` has finished (no-op on the CPU)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class PhaseTimer:
    """Collects the durations of named phases, synchronizing ``device`` after each.

    Arguments:
        device: where the timed work runs. On a CUDA device, phases are timed with
            CUDA events unless ``clock`` is given.
        clock: a function returning seconds (monotonic). Default:
            :func:`timeit.default_timer`. Tests inject a fake clock.

    Samples accumulate per phase name in the order recorded; :meth:`clear`
    forgets them (e.g. after warm-up steps).
    """

    def __init__(self, device: torch.device | str = "cpu", *, clock: Callable[[], float] | None = None) -> None:
        self.device = torch.device(device)
        self._use_cuda_events = self.device.type == "cuda" and clock is None
        self._clock = clock if clock is not None else timeit.default_timer
        self.samples: dict[str, list[float]] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the ``with`` body as one sample of phase ``name`` (seconds)."""
        if self._use_cuda_events:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
            end.synchronize()
            seconds = start.elapsed_time(end) / 1e3  # elapsed_time is in milliseconds
        else:
            begin = self._clock()
            yield
            synchronize(self.device)
            seconds = self._clock() - begin
        self.samples.setdefault(name, []).append(seconds)

    def clear(self) -> None:
        """Forget every sample."""
        self.samples.clear()

    def extend(self, other: PhaseTimer) -> None:
        """Append ``other``'s samples to this timer's, phase by phase (to pool repeated runs)."""
        for name, values in other.samples.items():
            self.samples.setdefault(name, []).extend(values)

    def summary(self) -> dict[str, Stats]:
        """:class:`Stats` per phase, in the order phases were first recorded."""
        return {name: summarize(values) for name, values in self.samples.items()}

    def step_totals(self) -> list[float]:
        """Seconds per step, for loops that record each phase once per step: the sum
        over phases of their i-th samples, for every i up to the fewest samples of a phase."""
        return [sum(samples) for samples in zip(*self.samples.values())]
