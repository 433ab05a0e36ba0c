"""Misuse gets an error that says what happened, on time, never a hang."""

from __future__ import annotations

import datetime
import time

import pytest
import torch
import torch.distributed as dist
from torch import nn

from ddp import BucketedDDP, FlatDDP, NaiveDDP, OverlapDDP
from ddp.launch import spawn

PEER_TIMEOUT_S = 2  # the process group timeout in the "a rank skips the step" case


def _error_of(action):
    """(exception class name, message) raised by ``action()``, or None if it returned."""
    try:
        action()
    except Exception as error:
        return type(error).__name__, str(error)
    return None


class _SparseLookup(nn.Module):
    """A table read through F.embedding(sparse=True): sparse gradients that construction cannot foresee."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(10, 4))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return nn.functional.embedding(tokens, self.table, sparse=True)


def _misuse(rank, world_size):
    x = torch.randn(3, 4)
    out = {"shapes_differ": _error_of(lambda: BucketedDDP(nn.Linear(4, 4 + rank)))}
    # A parameter on another device on one rank (meta: the only other device a CPU machine has).
    out["device_differs"] = _error_of(lambda: BucketedDDP(nn.Linear(4, 4, device="meta" if rank == 1 else "cpu")))
    for cls in (FlatDDP, BucketedDDP):
        embedding = nn.Sequential(nn.Embedding(10, 4, sparse=True), nn.Linear(4, 2))
        out[f"sparse_{cls.__name__}"] = _error_of(lambda: cls(embedding))
    lookup = NaiveDDP(_SparseLookup())
    out["sparse_at_runtime"] = _error_of(lambda: lookup(torch.tensor([1, 2 + rank])).sum().backward())
    lookup.abandon_gradient_synchronization()

    naive = NaiveDDP(nn.Linear(4, 2))
    out["finish_without_backward"] = _error_of(naive.finish_gradient_synchronization)
    naive(x).sum().backward()
    with naive.no_sync():
        out["finish_inside_no_sync"] = _error_of(naive.finish_gradient_synchronization)
    naive.finish_gradient_synchronization()
    out["wrapped_twice"] = _error_of(lambda: FlatDDP(naive.module))
    out["nothing_trainable"] = _error_of(lambda: OverlapDDP(nn.Linear(2, 2).requires_grad_(False)))
    # A problem on one rank only is reported on every rank, at once.
    out["rank1_nothing_trainable"] = _error_of(lambda: OverlapDDP(nn.Linear(2, 2).requires_grad_(rank != 1)))
    out["settings_differ"] = _error_of(lambda: BucketedDDP(nn.Linear(2, 2), bucket_size_mb=1 + rank))
    out["classes_differ"] = _error_of(lambda: (NaiveDDP if rank == 0 else FlatDDP)(nn.Linear(2, 2)))
    out["int_and_float_agree"] = _error_of(lambda: BucketedDDP(nn.Linear(2, 2), bucket_size_mb=[25, 25.0][rank]))

    # A second backward on rank 0 only, before finishing: refused before it adds anything
    # into gradients in flight, so the step still averages the first backward's gradients.
    for cls in (OverlapDDP, BucketedDDP):
        model = cls(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)))
        reference = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
        reference.load_state_dict(model.module.state_dict())
        reference(x).sum().backward()
        expected = [p.grad for p in reference.parameters()]
        for grad in expected:
            dist.all_reduce(grad)
            grad.div_(world_size)
        model(x).sum().backward()
        if rank == 0:
            out[f"second_backward_{cls.__name__}"] = _error_of(lambda: model(x).sum().backward())
        model.finish_gradient_synchronization()
        out[f"averaged_after_error_{cls.__name__}"] = all(
            torch.allclose(p.grad, e) for p, e in zip(model.module.parameters(), expected)
        )

    # Rank 1 skips a step: rank 0's all-reduce must fail after the group's timeout.
    group = dist.new_group(timeout=datetime.timedelta(seconds=PEER_TIMEOUT_S))
    model = BucketedDDP(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)), bucket_size_mb=None, process_group=group)
    if rank == 0:
        model(x).sum().backward()
        start = time.monotonic()
        out["peer_skipped_step"] = _error_of(model.finish_gradient_synchronization)
        out["waited_s"] = time.monotonic() - start
    else:
        time.sleep(PEER_TIMEOUT_S + 1)
    return out


@pytest.mark.distributed
def test_misuse_is_reported():
    ranks = spawn(_misuse, 2, timeout_s=60)
    for rank, out in enumerate(ranks):
        kind, message = out["shapes_differ"]
        assert kind == "ValueError" and "differ across ranks" in message and "[[0], [1]]" in message
        assert f"This rank ({rank}) has:\nparameter weight shape=({4 + rank}, 4)" in message
        kind, message = out["device_differs"]
        assert kind == "ValueError" and "device types" in message and "[[0], [1]]" in message
        assert f"weight shape=(4, 4) dtype=torch.float32 device={['cpu', 'meta'][rank]}" in message
        for cls in ("FlatDDP", "BucketedDDP"):
            kind, message = out[f"sparse_{cls}"]
            assert kind == "ValueError" and "rank 0: the module produces sparse gradients" in message
            assert "sparse=False" in message and message.endswith("On this rank: 0")
        kind, message = out["sparse_at_runtime"]
        assert kind == "GradientSyncError" and "table got a torch.sparse_coo gradient" in message
        kind, message = out["finish_without_backward"]
        assert kind == "GradientSyncError" and "no backward pass" in message
        kind, message = out["finish_inside_no_sync"]
        assert kind == "GradientSyncError" and "inside no_sync()" in message
        kind, message = out["wrapped_twice"]
        assert kind == "ValueError" and "cannot wrap the module on every rank" in message
        assert "rank 0: the module is already wrapped" in message and "rank 1: the module is already wrapped" in message
        kind, message = out["nothing_trainable"]
        assert kind == "ValueError" and "requires_grad=True" in message
        kind, message = out["rank1_nothing_trainable"]
        assert kind == "ValueError" and "(rank 1: the module has no parameter with requires_grad=True" in message
        assert "rank 0:" not in message
        kind, message = out["settings_differ"]
        assert kind == "ValueError" and "wrapper class or settings differ across ranks" in message
        settings = f"wrapper='BucketedDDP', compress_bf16=False, bucket_size_mb={1.0 + rank}"
        assert f"This rank ({rank}) has:\n{settings}" in message
        kind, message = out["classes_differ"]
        assert kind == "ValueError" and f"wrapper={['NaiveDDP', 'FlatDDP'][rank]!r}" in message
        assert out["int_and_float_agree"] is None
        for cls in ("OverlapDDP", "BucketedDDP"):
            if rank == 0:
                kind, message = out[f"second_backward_{cls}"]
                assert kind == "GradientSyncError" and "second backward pass reached 1." in message
                assert "nothing was added" in message and "no_sync()" in message
            assert out[f"averaged_after_error_{cls}"]
    kind, message = ranks[0]["peer_skipped_step"]
    assert kind == "GradientSyncError" and "did not complete" in message
    assert "1.weight" in message and "0.bias" in message  # the pending gradients are named
    assert PEER_TIMEOUT_S * 0.9 <= ranks[0]["waited_s"] < PEER_TIMEOUT_S + 10


def test_arguments_checked_before_any_communication():
    with pytest.raises(TypeError, match=r"module must be a torch\.nn\.Module"):
        NaiveDDP(lambda x: x)
    with pytest.raises(TypeError, match="compress_bf16 must be True or False"):
        FlatDDP(nn.Linear(2, 2), compress_bf16="yes")
    with pytest.raises(TypeError, match="bucket_size_mb must be a number"):
        BucketedDDP(nn.Linear(2, 2), bucket_size_mb="25")
    for bad in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="bucket_size_mb must be > 0"):
            BucketedDDP(nn.Linear(2, 2), bucket_size_mb=bad)
    with pytest.raises(TypeError, match="first_bucket_mb must be a number"):
        BucketedDDP(nn.Linear(2, 2), first_bucket_mb=True)
    for bad in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="first_bucket_mb must be > 0"):
            BucketedDDP(nn.Linear(2, 2), first_bucket_mb=bad)
    with pytest.raises(TypeError, match="rebuild_buckets must be True or False"):
        BucketedDDP(nn.Linear(2, 2), rebuild_buckets=1)


def test_needs_an_initialized_process_group():
    assert not dist.is_initialized()
    for cls in (NaiveDDP, FlatDDP, OverlapDDP, BucketedDDP):
        with pytest.raises(RuntimeError, match=f"{cls.__name__} needs an initialized process group"):
            cls(nn.Linear(2, 2))
