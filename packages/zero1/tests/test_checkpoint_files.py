"""save_checkpoint / load_checkpoint: nothing lost when a save is killed, nothing wrong loads silently.

Two spawned runs share one checkpoint folder. The first (2 ranks) saves step 2,
trains a step, and starts saving step 3, when rank 0 is killed (SIGKILL) just
before the commit, with every file and the manifest written. The second
(3 ranks) tries a copy of step 2 with one flipped byte (every rank must refuse
it), loads step 2, trains on, and starts saving step 5, when rank 2 is killed
halfway through writing its file. After each kill, step 2 is still the latest
checkpoint and loads; the run resumed from it at world size 3 is bitwise equal
to one process training with the unsharded optimizer. Damaged copies of the
checkpoint (truncated, empty, missing, flipped, a torn manifest) are each
refused with a message that names the file.

Every rank computes the same gradients (the data depends on the step only), as a
data-parallel wrapper would give them; the ranks train without one to stay fast.
"""

from __future__ import annotations

import io
import os
import random
import shutil
import signal

import pytest
import torch
from torch import nn

from ddp.launch import DistributedRunError, spawn
from zero1 import (
    CheckpointError,
    ShardedOptimizer,
    list_checkpoints,
    load_checkpoint,
    read_checkpoint,
    save_checkpoint,
    verify_checkpoint,
)

pytestmark = pytest.mark.distributed

TIMEOUT_S = 60
SAVED, KILLED_AT_COMMIT, KILLED_MID_WRITE = 2, 3, 5  # the steps of the three saves
METADATA = {"epoch": 7, "data_position": [3, 14]}


def _model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    model.register_buffer("calls", torch.zeros((), dtype=torch.int64))  # a buffer: rank 0 writes it
    return model


def _optimizer(model: nn.Module) -> ShardedOptimizer:
    return ShardedOptimizer(model.parameters(), torch.optim.AdamW, lr=1e-2, weight_decay=0.1)


def _train(model, optimizer, seed, steps):
    for step in steps:
        x = torch.randn(8, 6, generator=torch.Generator().manual_seed(seed * 1000 + step))
        optimizer.zero_grad()
        model(x).square().mean().backward()
        optimizer.step()
        model.calls += 1


def _kill_this_process():
    os.kill(os.getpid(), signal.SIGKILL)


def _save_then_die_at_commit(rank, world_size, directory, seed):
    model = _model(seed)
    optimizer = _optimizer(model)
    _train(model, optimizer, seed, range(SAVED))
    save_checkpoint(directory, SAVED, model, optimizer, metadata=METADATA)
    _train(model, optimizer, seed, range(SAVED, KILLED_AT_COMMIT))
    if rank == 0:
        rename = os.rename

        def die_before_committing(source, destination):
            if os.path.basename(destination).startswith("step_"):
                _kill_this_process()
            rename(source, destination)

        os.rename = die_before_committing
    save_checkpoint(directory, KILLED_AT_COMMIT, model, optimizer)


def _resume_then_die_mid_write(rank, world_size, directory, flipped, seed, results):
    out = {}
    model = _model(seed + 1)  # other values: the checkpoint must replace them all
    optimizer = _optimizer(model)
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(flipped, model, optimizer)
    out["flipped"] = str(caught.value)
    info = load_checkpoint(directory, model, optimizer)
    out["info"] = (info.step, info.world_size, info.metadata)
    _train(model, optimizer, seed, range(SAVED, KILLED_MID_WRITE))
    out["params"] = [p.detach().clone() for p in model.parameters()]
    out["calls"] = model.calls.item()
    torch.save(out, os.path.join(results, f"rank{rank}.pt"))  # this run ends in a kill: no return value

    if rank == 2:
        real_save = torch.save

        def die_halfway(obj, file, *args, **kwargs):
            buffer = io.BytesIO()
            real_save(obj, buffer, *args, **kwargs)
            data = buffer.getvalue()
            file.write(data[: len(data) // 2])
            file.flush()
            _kill_this_process()

        torch.save = die_halfway
    save_checkpoint(directory, KILLED_MID_WRITE, model, optimizer)


def _reference(seed, steps):
    """One process, plain AdamW, the same data: parameters after ``steps`` steps."""
    model = _model(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    _train(model, optimizer, seed, range(steps))
    return [p.detach() for p in model.parameters()]


def _assert_killed(caught, rank):
    assert f"--- rank {rank} ---\nexited with code {-signal.SIGKILL} and no result" in str(caught.value)


@pytest.fixture(scope="module")
def killed_at_commit(tmp_path_factory):
    """The folder after the first run: step 2 committed, step 3 killed just before its commit."""
    directory = tmp_path_factory.mktemp("checkpoints")
    seed = random.randrange(2**20)
    with pytest.raises(DistributedRunError) as caught:
        spawn(_save_then_die_at_commit, 2, args=(str(directory), seed), timeout_s=TIMEOUT_S)
    _assert_killed(caught, 0)
    return directory, seed


def test_a_save_killed_before_its_commit_leaves_the_previous_checkpoint(killed_at_commit):
    directory, seed = killed_at_commit
    assert list_checkpoints(directory) == [SAVED]
    interrupted = directory / f".step_{KILLED_AT_COMMIT:012d}.partial"
    assert sorted(p.name for p in interrupted.iterdir()) == ["manifest.json", "rank_00000.pt", "rank_00001.pt"]
    info = verify_checkpoint(directory)
    assert (info.step, info.world_size, info.metadata) == (SAVED, 2, METADATA)
    model_state, _, _ = read_checkpoint(directory)
    for name, expected in zip(("0.weight", "0.bias", "2.weight", "2.bias"), _reference(seed, SAVED)):
        assert torch.equal(model_state[name], expected), name
    assert model_state["calls"].item() == SAVED


def test_a_save_killed_mid_write_leaves_the_previous_checkpoint_and_resumes_at_three(killed_at_commit, tmp_path):
    directory, seed = killed_at_commit
    flipped = tmp_path / "flipped"
    shutil.copytree(directory / f"step_{SAVED:012d}", flipped / f"step_{SAVED:012d}")
    _flip_a_byte(flipped / f"step_{SAVED:012d}" / "rank_00001.pt")
    results = tmp_path / "results"
    results.mkdir()
    args = (str(directory), str(flipped), seed, str(results))
    with pytest.raises(DistributedRunError) as caught:
        spawn(_resume_then_die_mid_write, 3, args=args, timeout_s=TIMEOUT_S)
    _assert_killed(caught, 2)

    assert list_checkpoints(directory) == [SAVED]
    interrupted = directory / f".step_{KILLED_MID_WRITE:012d}.partial"
    assert not (interrupted / "manifest.json").exists() and (interrupted / "rank_00002.pt").exists()
    assert not (directory / f".step_{KILLED_AT_COMMIT:012d}.partial").exists()  # removed by the next save
    assert verify_checkpoint(directory).step == SAVED

    expected = _reference(seed, KILLED_MID_WRITE)
    for rank in range(3):
        out = torch.load(results / f"rank{rank}.pt")
        assert "checkpoint" in out["flipped"] and "is incomplete or corrupt" in out["flipped"]
        assert "rank_00001.pt's SHA-256 differs from the manifest's" in out["flipped"]
        assert out["info"] == (SAVED, 2, METADATA)
        assert out["calls"] == KILLED_MID_WRITE
        for got, want in zip(out["params"], expected, strict=True):
            assert torch.equal(got, want), f"rank {rank}: resumed at world size 3 differs from unsharded AdamW"


def _flip_a_byte(path):
    """Flip one bit in the middle of the file (most likely inside tensor data, which torch.load does not check)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


@pytest.mark.parametrize(
    "damage, expected",
    [
        (lambda step: _flip_a_byte(step / "rank_00000.pt"), "rank_00000.pt's SHA-256 differs from the manifest's"),
        (lambda step: _truncate(step / "rank_00001.pt"), "rank_00001.pt has {third} bytes, the manifest records"),
        (lambda step: (step / "rank_00000.pt").write_bytes(b""), "rank_00000.pt has 0 bytes, the manifest records"),
        (lambda step: (step / "rank_00001.pt").unlink(), "rank_00001.pt is missing"),
        (lambda step: _truncate(step / "manifest.json"), "manifest.json is not valid JSON"),
        (lambda step: (step / "manifest.json").unlink(), "it has no manifest.json"),
    ],
    ids=["flipped", "truncated", "empty", "missing", "torn-manifest", "no-manifest"],
)
def test_damaged_checkpoints_are_refused_naming_the_file(killed_at_commit, tmp_path, damage, expected):
    directory, _ = killed_at_commit
    step = tmp_path / f"step_{SAVED:012d}"
    shutil.copytree(directory / step.name, step)
    expected = expected.format(third=(step / "rank_00001.pt").stat().st_size // 3)
    damage(step)
    for check in (verify_checkpoint, read_checkpoint):
        with pytest.raises(CheckpointError) as caught:
            check(tmp_path)
        message = str(caught.value)
        assert message.startswith(f"checkpoint {step} is incomplete or corrupt: "), message
        assert expected in message and "Load an earlier step" in message, message
