"""A step whose backward pass raised is abandoned on every rank, and training goes on exactly.

First each rank's backward raises part-way, at a different depth on each rank,
so that OverlapDDP and BucketedDDP have started a different number of
all-reduces on each (the case in which the next step's all-reduces would pair
the wrong tensors). Without ``abandon_gradient_synchronization()`` the next
forward says what happened and what to do. Then only rank 0's backward raises,
and the ranks agree to abandon over a process group of their own, as the README
shows. After each abandoned step, the next steps average exactly what a single
process computes on the whole batch.
"""

from __future__ import annotations

import datetime

import pytest
import torch
import torch.distributed as dist
from torch import nn

from ddp import BucketedDDP, FlatDDP, GradientSyncError, NaiveDDP, OverlapDDP
from ddp.launch import spawn

pytestmark = pytest.mark.distributed

WORLD_SIZE = 2
PEER_TIMEOUT_S = 10  # all-reduces that pair up wrongly fail after this instead of the run's timeout
WRAPPERS = {
    "NaiveDDP": NaiveDDP,
    "FlatDDP": FlatDDP,
    "OverlapDDP": OverlapDDP,
    # 1e-9 MiB: one bucket per parameter, so a failed backward leaves some buckets launched and some not
    "BucketedDDP": lambda module, **kw: BucketedDDP(module, bucket_size_mb=1e-9, **kw),
}


class _FailInBackward(torch.autograd.Function):
    """Identity whose backward raises when ``armed``: an error part-way through backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, armed: bool) -> torch.Tensor:
        ctx.armed = armed
        return x.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        if ctx.armed:
            raise FloatingPointError("planted failure in backward")
        return grad, None


class _Net(nn.Module):
    """(B, 4) -> (B, 2). ``fail_at`` arms a failure after layer ``first`` or ``second`` in backward order."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.second = nn.Linear(4, 4)
        self.third = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor, fail_at: str | None = None) -> torch.Tensor:
        h = _FailInBackward.apply(torch.tanh(self.first(x)), fail_at == "first")
        h = _FailInBackward.apply(torch.tanh(self.second(h)), fail_at == "second")
        return self.third(h)


def _batch(seed: int, step: int) -> torch.Tensor:
    """The whole batch of a step: WORLD_SIZE * 2 samples; rank r takes rows 2r, 2r + 1."""
    return torch.randn(2 * WORLD_SIZE, 4, generator=torch.Generator().manual_seed(seed * 100 + step))


def _message(action) -> str | None:
    try:
        action()
    except GradientSyncError as error:
        return str(error)
    return None


def _train_on(model, rank, seed, steps):
    """The averaged gradients of each step in ``steps`` (SGD, lr 0.1, on this rank's rows)."""
    grads = []
    for step in steps:
        model.zero_grad()
        model(_batch(seed, step)[2 * rank : 2 * rank + 2]).sum().backward()
        model.finish_gradient_synchronization()
        grads.append([p.grad.clone() for p in model.module.parameters()])
        with torch.no_grad():
            for param in model.module.parameters():
                param -= 0.1 * param.grad
    return grads


def _abandon_and_go_on(rank, world_size, seed):
    group = dist.new_group(timeout=datetime.timedelta(seconds=PEER_TIMEOUT_S))
    control = dist.new_group(timeout=datetime.timedelta(seconds=PEER_TIMEOUT_S))
    mine = slice(2 * rank, 2 * rank + 2)
    out = {}
    for name, make in WRAPPERS.items():
        torch.manual_seed(seed + rank)  # rank 0's parameters are broadcast
        model = make(_Net(), process_group=group)

        # Every rank fails: rank 0 after the third layer's gradients are ready, rank 1 after the second's too.
        with pytest.raises(FloatingPointError):
            model(_batch(seed, 0)[mine], fail_at=["second", "first"][rank]).sum().backward()
        out[f"{name} next forward"] = _message(lambda: model(_batch(seed, 1)[mine]))
        if name in ("OverlapDDP", "BucketedDDP"):  # past the wrapper's forward, backward itself refuses
            out[f"{name} next backward"] = _message(lambda: model.module(_batch(seed, 1)[mine]).sum().backward())
        model.abandon_gradient_synchronization()
        out[f"{name} grads after abandon"] = [p.grad for p in model.module.parameters()]
        grads = _train_on(model, rank, seed, (1, 2))

        # Only rank 0 fails; the ranks agree over their own group, then abandon together.
        failed = torch.zeros(1)
        try:
            model(_batch(seed, 0)[mine], fail_at="second" if rank == 0 else None).sum().backward()
        except FloatingPointError:
            failed += 1
        dist.all_reduce(failed, group=control)
        assert failed.item() == 1
        model.abandon_gradient_synchronization()
        out[name] = grads + _train_on(model, rank, seed, (3,))
    return out


def _reference(seed):
    """The averaged gradients of steps 1, 2, 3 in one process on the whole batch (mean over ranks' sums)."""
    torch.manual_seed(seed)
    model = _Net()
    grads = []
    for step in (1, 2, 3):
        model.zero_grad()
        (model(_batch(seed, step)).sum() / WORLD_SIZE).backward()
        grads.append([p.grad.clone() for p in model.parameters()])
        with torch.no_grad():
            for param in model.parameters():
                param -= 0.1 * param.grad
    return grads


def test_a_failed_backward_is_abandoned_on_every_rank_and_training_goes_on():
    seed = int(torch.randint(0, 2**30, ()).item())
    results = spawn(_abandon_and_go_on, WORLD_SIZE, args=(seed,), timeout_s=90)
    expected = _reference(seed)
    for rank, out in enumerate(results):
        for name in WRAPPERS:
            message = out[f"{name} next forward"]
            assert message is not None, f"{name} rank {rank}: the forward after a failed backward was accepted"
            assert "last backward pass on this rank did not complete" in message
            assert "abandon_gradient_synchronization() on every rank" in message
            if name in ("OverlapDDP", "BucketedDDP"):
                message = out[f"{name} next backward"]
                assert message is not None and "second backward" not in message, (name, message)
                assert "did not complete" in message and "abandon_gradient_synchronization()" in message
            assert all(grad is None for grad in out[f"{name} grads after abandon"]), (name, rank)
            for step, (got, want) in enumerate(zip(out[name], expected, strict=True), start=1):
                for g, w in zip(got, want, strict=True):
                    torch.testing.assert_close(
                        g, w, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name} rank {rank} step {step}: {m}"
                    )
