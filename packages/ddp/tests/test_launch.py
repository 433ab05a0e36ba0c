"""The shared launcher: results come back by rank, failures and hangs become errors."""

import datetime
import importlib.util
import os
import sys
import time
import types

import pytest
import torch
import torch.distributed as dist

from ddp import launch
from ddp.launch import DistributedRunError, spawn

pytestmark = pytest.mark.distributed


def _sum_of_ranks(rank, world_size, offset):
    x = torch.tensor([float(rank + offset)])
    dist.all_reduce(x)
    return (rank, world_size, x.item(), os.environ["MASTER_PORT"], x)


def _rank_one_raises(rank, world_size):
    if rank == 1:
        raise ValueError("planted failure on rank 1")
    dist.barrier()


def _rank_zero_hangs(rank, world_size):
    if rank == 0:
        time.sleep(60)


def _ranks_stall(rank, world_size):
    """Rank 0 waits in a collective that rank 1 never joins, rank 1 hangs in Python, rank 2 finishes, rank 3 fails.

    Every rank gets past the group's creation (a collective) first, so the
    failure comes when the others are where they stall, however slow the start.
    """
    waiting = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=60))  # outlives the test
    if rank == 0:
        dist.all_reduce(torch.ones(2), group=waiting)
    elif rank == 1:
        time.sleep(60)
    elif rank == 3:
        raise ValueError("planted failure on rank 3")


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_results_in_rank_order(world_size):
    offset = torch.randint(0, 100, ()).item()
    out = spawn(_sum_of_ranks, world_size, args=(offset,), timeout_s=60)
    expected = sum(range(world_size)) + offset * world_size
    assert [o[0] for o in out] == list(range(world_size))
    assert all(o[1] == world_size and o[2] == expected for o in out)
    assert all(torch.equal(o[4], torch.tensor([float(expected)])) for o in out)  # tensors come back by value
    assert len({o[3] for o in out}) == 1


def test_each_run_gets_its_own_port():
    a = spawn(_sum_of_ranks, 1, args=(0,), timeout_s=60)[0][3]  # one process each: start-up is the cost
    b = spawn(_sum_of_ranks, 1, args=(0,), timeout_s=60)[0][3]
    assert a != b


def test_exception_names_the_rank():
    with pytest.raises(DistributedRunError, match=r"rank 1 ---(.|\n)*planted failure on rank 1"):
        spawn(_rank_one_raises, 2, timeout_s=60)


def test_hang_becomes_timeout_error():
    with pytest.raises(DistributedRunError, match=r"still running after timeout_s=3\nfinished: ranks \[.*not finished"):
        spawn(_rank_zero_hangs, 2, timeout_s=3)


def test_a_stopped_run_names_finished_and_unfinished_ranks_and_where_each_waits(monkeypatch):
    monkeypatch.setattr(launch, "FAILURE_GRACE_S", 1.0)  # the stalled ranks will not report; wait less for them
    with pytest.raises(DistributedRunError) as caught:
        spawn(_ranks_stall, 4, timeout_s=60)
    message = str(caught.value)
    assert message.startswith("1 of 4 ranks failed:\n--- rank 3 ---") and "planted failure on rank 3" in message
    assert "finished: ranks [2]; not finished: ranks [0, 1]" in message
    rank0, rank1 = message.split("--- rank 0 ")[1].split("--- rank 1 ")
    assert rank0.startswith("(not finished, waiting in torch.distributed.all_reduce); its stack")
    assert "in _ranks_stall" in rank0
    assert rank1.startswith("(not finished); its stack") and "in _ranks_stall" in rank1


def test_bad_arguments():
    with pytest.raises(ValueError, match="world_size"):
        spawn(_sum_of_ranks, 0)
    with pytest.raises(ValueError, match="backend"):
        spawn(_sum_of_ranks, 2, backend="mpi")


def test_function_from_a_module_loaded_by_path(tmp_path):
    # As pytest's importlib import mode loads test files: by path, under a dotted
    # name (parents registered as empty modules), without putting their folder on sys.path.
    (tmp_path / "outer" / "inner").mkdir(parents=True)
    source = tmp_path / "outer" / "inner" / "by_path.py"
    source.write_text("def triple(rank, world_size, x):\n    return 3 * x + rank\n")
    spec = importlib.util.spec_from_file_location("outer.inner.by_path", source)
    module = importlib.util.module_from_spec(spec)
    registered = {"outer": types.ModuleType("outer"), "outer.inner": types.ModuleType("outer.inner"), spec.name: module}
    sys.modules.update(registered)
    try:
        spec.loader.exec_module(module)
        assert spawn(module.triple, 1, args=(5,), timeout_s=60) == [15]
    finally:
        for name in registered:
            del sys.modules[name]
