"""ShardedOptimizer's contract beyond the update itself: ranks that disagree, frozen
parameters, schedulers, the live ``state`` after a load, refused optimizers, shards
of different steps, and the refusal to checkpoint after a step that raised."""

import copy
import random

import pytest
import torch
import torch.distributed as dist
from torch import nn

from ddp.launch import spawn
from zero1 import ShardedOptimizer, merge_sharded_state_dicts, save_checkpoint

TIMEOUT_S = 120


def _value_error(action) -> str:
    """The message of the ValueError that ``action()`` must raise (in a rank: a failure reaches the test)."""
    with pytest.raises(ValueError, match=r".") as caught:  # any message: the callers check it
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
    out["later_group"] = _value_error(lambda: optimizer.add_param_group({"params": [nn.Parameter(torch.randn(shape))]}))
    out["groups_after_error"] = len(optimizer.param_groups)
    # The same group on every rank still works afterwards, whatever each rank's values.
    optimizer.add_param_group({"params": [nn.Parameter(torch.randn(7))]})
    out["groups_after_agreement"] = len(optimizer.param_groups)

    # Same-shaped parameters in another order (e.g. from a set): the values tell them apart,
    # as they are equal on every rank (here by seed; in training, after the DDP wrapper's broadcast).
    torch.manual_seed(0)
    first, second = nn.Parameter(torch.randn(5)), nn.Parameter(torch.randn(5))
    out["reordered"] = _value_error(lambda: ShardedOptimizer([first, second][:: 1 - 2 * rank], torch.optim.SGD, lr=0.1))
    named = [("first", first), ("second", second)]
    out["reordered_names"] = _value_error(lambda: ShardedOptimizer(named[:: 1 - 2 * rank], torch.optim.SGD, lr=0.1))
    elsewhere = nn.Parameter(torch.empty(5, device="meta" if rank == 1 else "cpu"))
    out["device_type"] = _value_error(lambda: ShardedOptimizer([elsewhere], torch.optim.SGD, lr=0.1))
    return out


def _reordered_equal_values(rank, world_size):
    # Two same-shaped parameters of equal values (as fresh LayerNorm weights are), passed in
    # another order on rank 1: their values cannot tell them apart, their gradients can.
    first, second = nn.Parameter(torch.ones(5)), nn.Parameter(torch.ones(5))
    optimizer = ShardedOptimizer([first, second][:: 1 - 2 * rank], torch.optim.SGD, lr=0.1)
    torch.manual_seed(1)  # the same gradients on every rank, as after a DDP wrapper's all-reduce
    first.grad, second.grad = torch.randn(5), torch.randn(5)
    message = _value_error(optimizer.step)
    return message, first.detach().clone(), second.detach().clone()


@pytest.mark.distributed
def test_reordered_parameters_of_equal_values_are_caught_at_the_first_step():
    for message, first, second in spawn(_reordered_equal_values, 2, timeout_s=TIMEOUT_S):
        assert "the gradients of parameter group 0 are the same on every rank but come in another order" in message
        assert "ranks that agree: [[0], [1]]" in message and "Nothing was updated" in message
        assert torch.equal(first, torch.ones(5)) and torch.equal(second, torch.ones(5))


@pytest.mark.distributed
def test_ranks_that_disagree_on_the_parameters_all_get_an_error():
    for rank, out in enumerate(spawn(_disagreeing_ranks, 2, timeout_s=TIMEOUT_S)):
        for case in ("extra_parameter", "dtype", "later_group"):
            message = out[case]
            assert "differs across ranks" in message, (case, message)
            assert "ranks that agree: [[0], [1]]" in message and f"This rank ({rank}) has" in message
        assert "parameter group 1 differs" in out["later_group"]
        assert out["groups_after_error"] == 1 and out["groups_after_agreement"] == 2
        message = out["reordered"]
        assert "parameter group 0 holds the same parameters on every rank but in another order" in message
        assert "ranks that agree on the order: [[0], [1]]" in message and "not a set" in message
        message = out["reordered_names"]
        assert "differs across ranks" in message and ["first (5,)", "second (5,)"][rank] in message
        message = out["device_type"]
        assert "differs across ranks" in message and f"(5,) torch.float32 {['cpu', 'meta'][rank]}" in message


def _steps_and_torn_state(rank, world_size, directory):
    out = {}
    torch.manual_seed(0)
    params = [nn.Parameter(torch.randn(4)) for _ in range(3)]
    optimizer = ShardedOptimizer(params, torch.optim.SGD, lr=0.1, momentum=0.9)
    shards = {}
    for step in range(1, 5):
        for param in params:
            param.grad = torch.ones_like(param)
        optimizer.step()
        shards[step] = copy.deepcopy(optimizer.sharded_state_dict())
    out["shards"] = {2: shards[2], 4: shards[4]}
    # As after a save interrupted part-way: rank 0's shard of step 2, rank 1's of step 4.
    out["mixed_steps"] = _value_error(lambda: optimizer.load_state_dict(copy.deepcopy(shards[2 + 2 * rank])))
    out["steps_after_refusal"] = optimizer.steps_taken

    # A step that fails on rank 1, after its broadcasts (so the group stays usable for the rest):
    # a real failed collective would leave this rank's parameters from two steps the same way.
    if rank == 1:
        broadcast = optimizer._broadcaster.broadcast

        def broadcast_then_fail():
            broadcast()
            raise RuntimeError("planted: a collective failed")

        optimizer._broadcaster.broadcast = broadcast_then_fail
    for param in params:
        param.grad = torch.ones_like(param)
    if rank == 1:
        with pytest.raises(RuntimeError, match="planted"):
            optimizer.step()
        del optimizer._broadcaster.broadcast  # the failure was once
        for action in ("sharded_state_dict", "state_dict", "step"):
            with pytest.raises(RuntimeError) as caught:
                getattr(optimizer, action)()
            out[f"torn_{action}"] = str(caught.value)
    else:
        optimizer.step()
    with pytest.raises(RuntimeError) as caught:
        optimizer.consolidate_state_dict(to=0)
    out["torn_consolidate"] = str(caught.value)
    with pytest.raises(RuntimeError) as caught:
        save_checkpoint(directory, 5, nn.Module(), optimizer)
    out["torn_save"] = str(caught.value)

    optimizer.load_state_dict(copy.deepcopy(shards[4]))  # the way back: a checkpoint's state
    for param in params:
        param.grad = torch.ones_like(param)
    optimizer.step()
    optimizer.consolidate_state_dict(to=0)
    out["steps_after_recovery"] = optimizer.steps_taken
    return out


@pytest.mark.distributed
def test_shards_of_different_steps_and_a_torn_state_are_refused(tmp_path):
    ranks = spawn(_steps_and_torn_state, 2, args=(str(tmp_path),), timeout_s=TIMEOUT_S)
    with pytest.raises(ValueError, match=r"different numbers of steps \(rank 0: 2, rank 1: 4\)"):
        merge_sharded_state_dicts([ranks[0]["shards"][2], ranks[1]["shards"][4]])
    assert sorted(merge_sharded_state_dicts([ranks[1]["shards"][4], ranks[0]["shards"][4]])["state"]) == [0, 1, 2]
    for out in ranks:
        assert "different numbers of steps (rank 0: 2, rank 1: 4)" in out["mixed_steps"]
        assert "Nothing was loaded" in out["mixed_steps"] and out["steps_after_refusal"] == 4
        assert out["steps_after_recovery"] == 5
    torn = ranks[1]
    for action in ("sharded_state_dict", "state_dict", "step"):
        message = torn[f"torn_{action}"]
        assert message.startswith(f"{action}(): step() raised on this rank (RuntimeError: planted")
        assert "may mix two steps" in message and "no checkpoint can be taken" in message
        assert "load_checkpoint" in message
    assert torn["torn_consolidate"].startswith("consolidate_state_dict(): step() raised on this rank")
    assert "ranks [1] cannot give their state (rank 1: step() raised" in ranks[0]["torn_consolidate"]
    assert torn["torn_save"].startswith("sharded_state_dict(): step() raised on this rank")
    assert "save_checkpoint failed on ranks [1]" in ranks[0]["torn_save"]
    assert not list(tmp_path.iterdir())  # the refused save wrote nothing


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
    for owners, state_elements, live, entries in results:
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
