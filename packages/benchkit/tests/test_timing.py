"""Statistics and the phase timer, on a fake clock (nothing is timed for real)."""

import random
import statistics

import pytest

from benchkit.timing import PhaseTimer, Stats, summarize


def test_summarize_matches_the_definitions():
    samples = [random.uniform(0.001, 2.0) for _ in range(random.randint(2, 30))]
    stats = summarize(samples)
    mean = sum(samples) / len(samples)
    ordered = sorted(samples)
    mid = len(samples) // 2
    median = ordered[mid] if len(samples) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    variance = sum((s - mean) ** 2 for s in samples) / (len(samples) - 1)
    assert stats.mean == pytest.approx(mean)
    assert stats.median == pytest.approx(median)
    assert stats.std == pytest.approx(variance**0.5)
    assert (stats.min, stats.max) == (ordered[0], ordered[-1])


def test_summarize_of_one_sample_has_zero_spread():
    assert summarize([0.25]) == Stats(mean=0.25, std=0.0, median=0.25, min=0.25, max=0.25)


def test_summarize_rejects_empty_and_non_finite():
    with pytest.raises(ValueError, match="at least one"):
        summarize([])
    with pytest.raises(ValueError, match="finite"):
        summarize([1.0, float("nan")])


class FakeClock:
    """Returns preset readings in order, one per call."""

    def __init__(self, readings):
        self.readings = list(readings)

    def __call__(self):
        return self.readings.pop(0)


def test_phase_timer_records_durations_per_phase_on_an_injected_clock():
    durations = {"forward": [], "backward": []}
    readings, now = [], 100.0
    for _ in range(4):
        for phase in durations:
            duration = random.uniform(0.01, 1.0)
            durations[phase].append(duration)
            readings += [now, now + duration]
            now += duration + random.uniform(0.0, 0.5)  # untimed gap between phases
    timer = PhaseTimer("cpu", clock=FakeClock(readings))
    for _ in range(4):
        for phase in durations:
            with timer.phase(phase):
                pass
    assert list(timer.samples) == ["forward", "backward"]
    for phase, expected in durations.items():
        assert timer.samples[phase] == pytest.approx(expected)
        assert timer.summary()[phase].mean == pytest.approx(statistics.fmean(expected))
    timer.clear()
    assert timer.summary() == {}
