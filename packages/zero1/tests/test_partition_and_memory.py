"""The partition, the memory model and the checks that need no process group."""

import random

import pytest
import torch

from zero1 import ShardedOptimizer, merge_sharded_state_dicts, partition_parameters, predict_memory


def _brute_force_lpt(sizes, world_size, loads):
    """Independent restatement: largest first (ties by position), onto the least-loaded, lowest rank."""
    loads = list(loads)
    owners = {}
    remaining = list(range(len(sizes)))
    while remaining:
        biggest = max(sizes[i] for i in remaining)
        index = min(i for i in remaining if sizes[i] == biggest)
        least = min(loads)
        rank = loads.index(least)
        owners[index] = rank
        loads[rank] += sizes[index]
        remaining.remove(index)
    return [owners[i] for i in range(len(sizes))]


@pytest.mark.parametrize("world_size", [1, 2, 3, 5, 8])
def test_partition_is_greedy_and_within_bound(world_size):
    rng = random.Random()
    for _ in range(50):
        sizes = [rng.choice([1, 7, 64, 64, 300, 4096]) * rng.randint(1, 4) for _ in range(rng.randint(0, 30))]
        loads = [rng.randint(0, 500) for _ in range(world_size)]
        owners = partition_parameters(sizes, world_size, loads)
        assert owners == _brute_force_lpt(sizes, world_size, loads)
        assert owners == partition_parameters(sizes, world_size, loads)  # deterministic
        fresh = partition_parameters(sizes, world_size)
        per_rank = [sum(s for s, o in zip(sizes, fresh) if o == r) for r in range(world_size)]
        assert sum(per_rank) == sum(sizes)
        assert max(per_rank, default=0) <= sum(sizes) / world_size + max(sizes, default=0)


def test_partition_examples_and_ties():
    assert partition_parameters([10, 40, 30, 20], 2) == [0, 0, 1, 1]
    assert partition_parameters([5, 5, 5, 5], 2) == [0, 1, 0, 1]  # equal sizes keep their order
    assert partition_parameters([3], 4) == [0]  # more ranks than parameters: ranks 1..3 own nothing
    assert partition_parameters([], 3) == []
    assert partition_parameters([4, 4], 2, initial_loads=[10, 0]) == [1, 1]


def test_partition_bad_arguments():
    with pytest.raises(ValueError, match="world_size"):
        partition_parameters([1], 0)
    with pytest.raises(ValueError, match="sizes"):
        partition_parameters([1, -2], 2)
    with pytest.raises(ValueError, match="initial_loads"):
        partition_parameters([1], 2, initial_loads=[0])


def test_predict_memory_by_hand():
    # 1000 + 600 + 400 elements over 2 ranks: rank 0 owns 1000, rank 1 owns 600 + 400.
    p = predict_memory([600, 1000, 400], world_size=2)
    assert (p.param_bytes, p.grad_bytes) == (8000, 8000)
    assert p.state_bytes == (8000, 8000)
    assert p.unsharded_state_bytes == 16000
    assert p.state_bound_bytes == (2000 / 2 + 1000) * 8
    assert p.total_bytes(1) == 24000 and p.unsharded_total_bytes == 32000
    sgd = predict_memory([600, 1000, 400], world_size=3, param_bytes=2, grad_bytes=2, state_bytes_per_element=4)
    assert sgd.state_bytes == (4000, 2400, 1600) and sgd.param_bytes == 4000


def test_merge_rejects_incomplete_or_mixed_shards():
    def shard(rank, owners, state):
        return {
            "state": state,
            "param_groups": [{"lr": 0.1, "params": [0, 1]}],
            "zero1_shard": {"rank": rank, "world_size": 2, "owners": owners},
        }

    a, b = shard(0, [0, 1], {0: {"x": torch.ones(1)}}), shard(1, [0, 1], {1: {"x": torch.zeros(1)}})
    merged = merge_sharded_state_dicts([b, a])
    assert list(merged["state"]) == [0, 1] and "zero1_shard" not in merged
    with pytest.raises(ValueError, match="one state dict per rank"):
        merge_sharded_state_dicts([a])
    with pytest.raises(ValueError, match="different partitions"):
        merge_sharded_state_dicts([a, shard(1, [1, 1], {})])
    with pytest.raises(ValueError, match="owned by rank 0"):
        merge_sharded_state_dicts([a, shard(1, [0, 1], {0: {}})])
    with pytest.raises(ValueError, match="sharded_state_dict"):
        merge_sharded_state_dicts([{"state": {}, "param_groups": []}])
    with pytest.raises(ValueError, match="none"):
        merge_sharded_state_dicts([])


def test_constructor_errors_name_the_argument():
    params = [torch.nn.Parameter(torch.zeros(2))]
    with pytest.raises(TypeError, match="optimizer_cls"):
        ShardedOptimizer(params, "AdamW")
    with pytest.raises(TypeError, match="optimizer_cls"):
        ShardedOptimizer(params, ShardedOptimizer)
    with pytest.raises(ValueError, match="broadcast_mode"):
        ShardedOptimizer(params, torch.optim.AdamW, broadcast_mode="allgather")
    with pytest.raises(ValueError, match="bucket_size_mb"):
        ShardedOptimizer(params, torch.optim.AdamW, bucket_size_mb=0)
    with pytest.raises(RuntimeError, match="init_process_group"):
        ShardedOptimizer(params, torch.optim.AdamW, lr=1e-3)
