"""ShardedOptimizer's contract beyond the update itself: ranks that disagree, frozen
parameters, schedulers, the live ``state`` after a load, refused optimizers."""

import copy
import random

import pytest
import torch
import torch.distributed as dist
from torch import nn

from ddp.launch import spawn
from zero1 import ShardedOptimizer

TIMEOUT_S = 120


def _value_error(action) -> str:
    """The message of the ValueError that ``action()`` must raise (in a rank: a failure reaches the test)."""
    with pytest.raises(ValueError) as caught:
        action()
    return str(caught.value)


def _disagreeing_ranks(rank, world_size):
    out = {}
    params = [nn.Parameter(torch.randn(5)) for _ in range(2 + rank)]  # rank 1 has one more
    out["extra_parameter"] = _value_error(lambda: ShardedOptimizer(params, torch.optim.AdamW, lr=0.1))
    dtype = [torch.float32, torch.float64][rank]
    params = [nn.Parameter(torch.randn(5)), nn.Parameter(torch.randn(5, dtype=dtype))]
    out["dtype"] = _value_error(lambda: ShardedOptimizer(params, torch.optim.AdamW, lr=0.1))

    optimizer = ShardedOptimizer([nn.Parameter(torch.randn(4, 3))], torch.optim.SGD, lr=0.1)
    shape = [(2, 6), (6, 2)][rank]  # same size, another shape
    out["later_group"] = _value_error(
        lambda: optimizer.add_param_group({"params": [nn.Parameter(torch.randn(shape))]})
    )
    out["groups_after_error"] = len(optimizer.param_groups)
    # The same group on every rank still works afterwards.
    optimizer.add_param_group({"params": [nn.Parameter(torch.randn(7))]})
    out["groups_after_agreement"] = len(optimizer.param_groups)
    return out


@pytest.mark.distributed
def test_ranks_that_disagree_on_the_parameters_all_get_an_error():
    for rank, out in enumerate(spawn(_disagreeing_ranks, 2, timeout_s=TIMEOUT_S)):
        for case in ("extra_parameter", "dtype", "later_group"):
            message = out[case]
            assert "differs across ranks" in message, (case, message)
            assert "ranks that agree: [[0], [1]]" in message and f"This rank ({rank}) has" in message
        assert "parameter group 1 differs" in out["later_group"]
        assert out["groups_after_error"] == 1 and out["groups_after_agreement"] == 2


def _one_cycle(optimizer):
    return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.05, total_steps=10)


def _cyclic(optimizer):
    return torch.optim.lr_scheduler.CyclicLR(optimizer, base_lr=0.01, max_lr=0.05, step_size_up=3)


def _with_scheduler(rank, world_size, seed, optimizer_cls, options, make_scheduler):
    """Parameters after 6 steps of a sharded and of a plain optimizer under the same scheduler."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))
    reference = copy.deepcopy(model)
    sharded = ShardedOptimizer(model.parameters(), optimizer_cls, **options)
    plain = optimizer_cls(reference.parameters(), **options)
    schedulers = [make_scheduler(sharded), make_scheduler(plain)]
    for step in range(6):
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(seed + step))  # the same on every rank
        for net, optimizer, scheduler in zip((model, reference), (sharded, plain), schedulers):
            optimizer.zero_grad()
            net(x).square().mean().backward()
            optimizer.step()
            scheduler.step()
    return all(torch.equal(a, b) for a, b in zip(model.parameters(), reference.parameters()))


@pytest.mark.distributed
@pytest.mark.parametrize(
    "optimizer_cls, options, make_scheduler",
    [(torch.optim.AdamW, {"lr": 0.01}, _one_cycle), (torch.optim.SGD, {"lr": 0.01}, _cyclic)],
    ids=["AdamW-OneCycleLR", "SGD-CyclicLR"],
)
def test_schedulers_that_read_the_wrapped_defaults(optimizer_cls, options, make_scheduler):
    # OneCycleLR and CyclicLR cycle betas/momentum too: they need them in optimizer.defaults.
    args = (random.randrange(2**31), optimizer_cls, options, make_scheduler)
    assert spawn(_with_scheduler, 2, args=args, timeout_s=TIMEOUT_S) == [True, True]


def _frozen_and_reloaded(rank, world_size):
    frozen = nn.Parameter(torch.randn(4000), requires_grad=False)
    trained = [nn.Parameter(torch.randn(1000)) for _ in range(4)]
    optimizer = ShardedOptimizer([frozen, *trained], torch.optim.AdamW, lr=0.1)
    for param in trained:
        param.grad = torch.ones_like(param)
    optimizer.step()
    state_elements = sum(t.numel() for s in optimizer.state.values() for t in s.values() if t.dim() > 0)

    optimizer.load_state_dict(copy.deepcopy(optimizer.sharded_state_dict()))  # a resume from this rank's shard
    optimizer.step()
    live = optimizer.state is optimizer.local_optimizer.state
    return optimizer.owners[1:], state_elements, live, len(optimizer.state)


@pytest.mark.distributed
def test_frozen_parameters_weigh_nothing_and_state_stays_live_after_a_load():
    results = spawn(_frozen_and_reloaded, 2, timeout_s=TIMEOUT_S)
    trained_owners = results[0][0]
    assert sorted(trained_owners) == [0, 0, 1, 1]  # the frozen 4000 elements did not push these onto rank 1
    for rank, (owners, state_elements, live, entries) in enumerate(results):
        assert owners == trained_owners
        assert state_elements == 2 * 2 * 1000  # exp_avg and exp_avg_sq of its two parameters
        assert live and entries == 2


def test_lbfgs_is_refused():
    with pytest.raises(TypeError, match="LBFGS cannot be sharded"):
        ShardedOptimizer([nn.Parameter(torch.randn(3))], torch.optim.LBFGS)


def _outside_the_group(rank, world_size):
    group = dist.new_group([0])  # every rank takes part in creating it

    def build():
        return ShardedOptimizer([nn.Parameter(torch.randn(3))], torch.optim.SGD, lr=0.1, process_group=group)

    return build().world_size if rank == 0 else _value_error(build)


@pytest.mark.distributed
def test_a_rank_outside_the_process_group_is_told_so():
    inside, outside = spawn(_outside_the_group, 2, timeout_s=TIMEOUT_S)
    assert inside == 1
    assert "(global rank 1) is not a member of process_group" in outside
