"""benchkit.ranks: telling torchrun's processes apart, and running a function on every rank either way."""

import pytest
import torch

from benchkit.errors import BenchkitError
from benchkit.ranks import launched_by_torchrun, run_on_ranks
from ddp.launch import spawn

TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


@pytest.fixture
def not_under_torchrun(monkeypatch):
    for name in TORCHRUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_launched_by_torchrun_needs_all_three_variables(monkeypatch, not_under_torchrun):
    assert not launched_by_torchrun()
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert not launched_by_torchrun()
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert launched_by_torchrun()


def _rank_and_offset(rank, world_size, offset):
    return (rank + offset, world_size)


@pytest.mark.distributed
def test_spawns_ranks_when_not_under_torchrun(not_under_torchrun):
    results = run_on_ranks(_rank_and_offset, nproc=2, device_type="cpu", timeout_s=60, args=(10,))
    assert results == [(10, 2), (11, 2)]


def _inside_a_launched_rank(rank, world_size):
    # ddp.launch.spawn sets the variables and initializes the group, as torchrun would; run_on_ranks
    # must use that group (nproc is ignored) and gather every rank's value onto rank 0.
    return run_on_ranks(_rank_and_offset, nproc=5, device_type="cpu", timeout_s=60, args=(100,))


@pytest.mark.distributed
def test_under_a_launcher_rank_zero_gets_every_rank_value():
    assert spawn(_inside_a_launched_rank, 2, timeout_s=60) == [[(100, 2), (101, 2)], None]


def test_more_ranks_than_gpus_is_refused(not_under_torchrun):
    nproc = torch.cuda.device_count() + 1
    with pytest.raises(BenchkitError, match=f"--nproc {nproc} needs {nproc} GPUs"):
        run_on_ranks(_rank_and_offset, nproc=nproc, device_type="cuda", timeout_s=60, args=(0,))
