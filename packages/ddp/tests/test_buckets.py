"""Bucket assignment and the in-order launcher, without processes."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from ddp.bucketed import DEFAULT_FIRST_BUCKET_MB, assign_buckets
from ddp.errors import GradientSyncError
from ddp.ordering import InOrderLauncher

MIB = 2**20


def _floats(*numels, dtype=torch.float32):
    return [torch.empty(n, dtype=dtype) for n in numels]


def test_buckets_fill_in_reverse_order_until_they_reach_the_cap():
    sizes = torch.randint(1, 1000, (12,)).tolist()
    params = _floats(*sizes)
    cap_mb = 1500 * 4 / MIB  # 1500 float32 values
    buckets = assign_buckets(params, cap_mb)
    assert [i for bucket in buckets for i in bucket] == list(reversed(range(len(params))))
    for k, bucket in enumerate(buckets):
        total = sum(sizes[i] for i in bucket)
        assert total - sizes[bucket[-1]] < 1500  # below the cap until its last parameter joined
        if k + 1 < len(buckets):  # a bucket closes only once it has reached the cap
            assert total >= 1500


def test_buckets_are_pytorch_ddps():
    # torch's own assignment (the one DistributedDataParallel makes with a 1 MiB first
    # bucket and bucket_cap_mb after it) as the reference, on parameters in launch order
    numels = torch.randint(1, 20_000, (40,)).tolist()
    params = _floats(*numels)
    first_bytes, cap_bytes = 8_000 * 4, 30_000 * 4
    in_launch_order = list(reversed(params))
    expected, _ = dist._compute_bucket_assignment_by_size(in_launch_order, [first_bytes, cap_bytes])
    expected = [[len(params) - 1 - i for i in bucket] for bucket in expected]
    assert assign_buckets(params, cap_bytes / MIB, first_bucket_mb=first_bytes / MIB) == expected


def test_a_small_parameter_between_two_oversize_ones_shares_a_bucket():
    # (a norm's weight between two projections larger than the cap)
    params = _floats(5000, 10, 5000)
    assert assign_buckets(params, 100 * 4 / MIB) == [[2], [1, 0]]


def test_oversize_parameter_closes_the_bucket_it_joins():
    params = _floats(10, 5000, 10, 10)
    assert assign_buckets(params, 100 * 4 / MIB) == [[3, 2, 1], [0]]


def test_tiny_cap_one_bucket_per_parameter_and_none_one_bucket():
    params = _floats(3, 4, 5)
    assert assign_buckets(params, 1e-9) == [[2], [1], [0]]
    assert assign_buckets(params, None) == [[2, 1, 0]]


def test_one_dtype_per_bucket():
    params = _floats(2, 2) + _floats(2, dtype=torch.bfloat16) + _floats(2)
    assert assign_buckets(params, None) == [[3], [2], [1, 0]]


def test_default_first_bucket_is_pytorch_ddps():
    assert DEFAULT_FIRST_BUCKET_MB * MIB == dist._DEFAULT_FIRST_BUCKET_BYTES


def test_first_bucket_has_its_own_smaller_cap():
    params = _floats(30, 30, 30, 30, 30)
    # first bucket: closed at 50 values; the others: at 100
    assert assign_buckets(params, 100 * 4 / MIB, first_bucket_mb=50 * 4 / MIB) == [[4, 3], [2, 1, 0]]
    assert assign_buckets(params, 100 * 4 / MIB) == [[4, 3, 2, 1], [0]]
    # a parameter above the first cap gets bucket 0 alone
    assert assign_buckets(_floats(10, 80), 100 * 4 / MIB, first_bucket_mb=50 * 4 / MIB) == [[1], [0]]
    assert assign_buckets(_floats(80, 10), 100 * 4 / MIB, first_bucket_mb=50 * 4 / MIB) == [[1, 0]]


def test_first_bucket_cap_never_exceeds_the_cap_and_none_ignores_it():
    params = _floats(30, 30, 30)
    assert assign_buckets(params, 40 * 4 / MIB, first_bucket_mb=1000) == [[2, 1], [0]]
    assert assign_buckets(params, None, first_bucket_mb=1e-9) == [[2, 1, 0]]


def test_buckets_follow_a_given_order():
    params = _floats(10, 10, 10, 10)
    assert assign_buckets(params, 20 * 4 / MIB, order=[1, 3, 0, 2]) == [[1, 3], [0, 2]]
    assert assign_buckets(params, 20 * 4 / MIB, first_bucket_mb=10 * 4 / MIB, order=[1, 3, 0, 2]) == [[1], [3, 0], [2]]
    for bad in ([0, 1, 2], [0, 1, 2, 2], [0, 1, 2, 4]):
        with pytest.raises(ValueError, match="every parameter index"):
            assign_buckets(params, None, order=bad)


class _FakeWork:
    def __init__(self, log, unit):
        self.log, self.unit = log, unit

    def wait(self):
        self.log.append(("wait", self.unit))


def _launcher(units, log):
    names = [f"p{i}" for i in range(sum(map(len, units)))]
    return InOrderLauncher(
        units,
        names,
        launch=lambda k: log.append(("launch", k)) or _FakeWork(log, k),
        complete=lambda k: log.append(("complete", k)),
    )


def test_units_launch_in_index_order_whatever_the_readiness_order():
    log = []
    launcher = _launcher([[3, 2], [1], [0]], log)
    launcher.mark_ready(1)  # unit 1 is complete, but unit 0 is not: nothing may start
    launcher.mark_ready(0)
    assert log == []
    launcher.mark_ready(3)
    assert log == []
    launcher.mark_ready(2)  # unit 0 completes: units 0, 1, 2 start, in order
    assert log == [("launch", 0), ("launch", 1), ("launch", 2)]
    launcher.finish()
    assert log[3:] == [("wait", 0), ("complete", 0), ("wait", 1), ("complete", 1), ("wait", 2), ("complete", 2)]


def test_without_a_completion_finish_waits_for_every_unit():
    log = []
    launcher = InOrderLauncher([[1], [0]], ["p0", "p1"], launch=lambda k: _FakeWork(log, k), complete=None)
    launcher.mark_ready(1)
    launcher.mark_ready(0)
    launcher.finish()
    assert log == [("wait", 0), ("wait", 1)]


def test_finish_launches_units_whose_gradients_never_came():
    log = []
    launcher = _launcher([[2], [1], [0]], log)
    launcher.mark_ready(0)  # parameters 2 and 1 got no gradient on this rank
    launcher.finish()
    assert [entry for entry in log if entry[0] == "launch"] == [("launch", 0), ("launch", 1), ("launch", 2)]
    log.clear()
    launcher.mark_ready(2)  # a new step starts from scratch
    assert log == [("launch", 0)]


def test_a_gradient_ready_twice_is_an_error():
    launcher = _launcher([[1], [0]], [])
    assert not launcher.is_ready(0)
    launcher.mark_ready(0)
    assert launcher.is_ready(0) and not launcher.is_ready(1)  # the other parameter is still free
    with pytest.raises(GradientSyncError, match="p0's gradient was reported complete twice"):
        launcher.mark_ready(0)


def test_abandon_launches_every_unit_left_and_completes_none():
    log = []
    launcher = _launcher([[2], [1], [0]], log)
    launcher.mark_ready(2)  # the backward that raised got as far as unit 0
    launcher.abandon()  # the rest is launched, so that every rank has issued the same all-reduces
    assert log == [("launch", 0), ("launch", 1), ("launch", 2), ("wait", 0), ("wait", 1), ("wait", 2)]
    log.clear()
    launcher.mark_ready(2)  # a new step starts from scratch
    assert log == [("launch", 0)]


def test_units_must_partition_the_parameters():
    with pytest.raises(ValueError, match="partition"):
        _launcher([[0], [0]], [])
