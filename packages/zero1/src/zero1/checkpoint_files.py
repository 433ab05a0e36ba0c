"""Checkpoints of a data-parallel job on disk: one folder per step, committed atomically, verified on every load.

A checkpoint holds the model's state dict, the :class:`~zero1.ShardedOptimizer`'s
state, the step and the caller's metadata, written by every rank at once::

    <directory>/
        step_000000001000/             a committed checkpoint
            manifest.json              written last: step, world size, partition, parameter
                                       shapes and dtypes, metadata, each file's size and SHA-256
            rank_00000.pt              rank 0's torch.save: its optimizer shard and its model entries
            rank_00001.pt              ...
        .step_000000002000.partial/    a save in progress, or one that was interrupted

Each rank writes the optimizer state it owns and the model parameters it owns
(the optimizer's partition; rank 0 also writes buffers and parameters outside
the optimizer), so the writing is spread over the ranks.

**Save** (every rank; collectives over the optimizer's process group): rank 0
creates the hidden ``.partial`` folder (a committed step is never overwritten);
every rank writes its file there, hashing the bytes as they are written, and
fsyncs it; the sizes and hashes are all-gathered; rank 0 writes
``manifest.json`` (a temporary name, fsync, rename), fsyncs the folder, renames
it to ``step_<N>`` (the commit, atomic on a POSIX filesystem) and fsyncs the
parent. An interruption at any point before the rename (an exception, SIGKILL,
a full disk, a power cut) leaves only the hidden folder, which loads ignore and
the next save removes: the earlier checkpoints are untouched.

**Load** (every rank): every problem is reported on every rank, before anything
is loaded, by a :class:`CheckpointError` or ``ValueError`` that names it. The
manifest must be complete and of this format; each file must have the size and
the SHA-256 the manifest records (the ranks split the files among them); each
file must record the manifest's step, world size, its own rank and the
manifest's partition; the optimizer must have the saved parameters (number,
shapes, dtypes) and the model the saved state dict's keys and shapes. The
checkpoint then loads at any world size: each rank takes the model from all
files and cuts its own optimizer shard out of the saved ones
(:func:`zero1.checkpoint.shard_of`).

The folder must be on a filesystem that every rank sees (as for any sharded
checkpoint); one job saves into a folder at a time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
import re
import shutil
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

import torch
import torch.distributed as dist
from torch import nn

from zero1.checkpoint import SHARD_KEY, merge_sharded_state_dicts, shard_of
from zero1.gather import all_gather_ints, collective_device
from zero1.optimizer import ShardedOptimizer

__all__ = [
    "CheckpointError",
    "CheckpointInfo",
    "list_checkpoints",
    "load_checkpoint",
    "read_checkpoint",
    "save_checkpoint",
    "verify_checkpoint",
]

FORMAT = "trainsys-zero1-checkpoint"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
_STEP_DIGITS = 12  # folder names sort like their steps up to 10**12 steps
_COMMITTED = re.compile(rf"step_(\d{{{_STEP_DIGITS}}})")
_READ_CHUNK_BYTES = 1 << 24  # files are hashed 16 MiB at a time
_DIGEST_WORDS = 4  # a SHA-256 digest (32 bytes) travels as four int64
_MAX_NAMES_SHOWN = 8  # error messages list at most this many keys

# A file's state after verification: a code and a number, exchanged between ranks as two int64.
_FILE_OK, _FILE_MISSING, _FILE_UNREADABLE, _FILE_WRONG_SIZE, _FILE_WRONG_HASH = range(5)


class CheckpointError(RuntimeError):
    """A checkpoint on disk is incomplete, corrupt, or missing; the message says which file and why."""


@dataclasses.dataclass(frozen=True)
class CheckpointInfo:
    """What a checkpoint records about itself.

    Attributes:
        path: its folder, ``<directory>/step_<step, 12 digits>``.
        step: the step it was saved at.
        world_size: the number of ranks that saved it.
        metadata: the caller's metadata, as JSON gave it back (tuples become lists).
    """

    path: Path
    step: int
    world_size: int
    metadata: dict[str, Any]


def list_checkpoints(directory: str | os.PathLike) -> list[int]:
    """The steps of the committed checkpoints in ``directory``, ascending (``[]`` if none or no folder)."""
    root = Path(directory)
    if not root.is_dir():
        return []
    found = (_COMMITTED.fullmatch(entry.name) for entry in root.iterdir() if entry.is_dir())
    return sorted(int(match.group(1)) for match in found if match)


def save_checkpoint(
    directory: str | os.PathLike,
    step: int,
    model: nn.Module,
    optimizer: ShardedOptimizer,
    *,
    metadata: Mapping[str, Any] | None = None,
    keep_last: int | None = None,
) -> Path:
    """Save ``model`` and ``optimizer`` as checkpoint ``step`` of ``directory``, atomically (a collective).

    Call it on every rank of the optimizer's process group, after the same
    ``optimizer.step()``. Nothing of the checkpoint is visible until every
    rank's file and the manifest are on disk; an interrupted save leaves the
    earlier checkpoints as they were (see :mod:`zero1.checkpoint_files`).

    Arguments:
        directory: the checkpoints' folder, created if needed; on a filesystem
            every rank sees.
        step: the training step, an int >= 0; a step is saved once.
        model: the trained module, every rank's copy the same (pass the module
            itself, e.g. ``ddp_model.module``, to load it into a plain module later;
            a wrapper's keys carry its ``module.`` prefix).
        optimizer: the job's :class:`~zero1.ShardedOptimizer`.
        metadata: anything JSON can hold (numbers, strings, lists, dicts), e.g.
            the data loader's position; rank 0's is saved.
        keep_last: if given (>= 1), the older checkpoints beyond the newest
            ``keep_last`` are deleted once this one is committed.

    Returns:
        The committed checkpoint's folder.

    Raises:
        FileExistsError: on every rank, if ``step`` is already saved.
        TypeError, ValueError: on every rank, for a bad argument on any rank,
            or ranks passing different steps.
        RuntimeError: on every rank, if a ``step()`` raised on some rank (its
            state may mix two steps), or some rank could not write its file
            (e.g. the disk is full); the earlier checkpoints are untouched.

    Example::

        while done < steps:
            train_one_step()
            done += 1
            if done % 1000 == 0:
                save_checkpoint("ckpt", done, model.module, optimizer, metadata={"epoch": epoch}, keep_last=3)
    """
    if not isinstance(optimizer, ShardedOptimizer):
        raise TypeError(f"optimizer must be a zero1.ShardedOptimizer, got {type(optimizer).__name__}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    group, rank = optimizer.process_group, optimizer.rank
    root = Path(directory)
    problem: BaseException | None = None
    partial: Path | None = None  # rank 0 creates it; removed again if the save stops before the commit
    try:
        _check_step(step)
        if keep_last is not None and (isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1):
            raise ValueError(f"keep_last must be an int >= 1 or None, got {keep_last!r}")
        metadata = _json_metadata(metadata)
        payload = _rank_payload(model, optimizer, step)
        final, partial = _step_folder(root, step), _partial_folder(root, step)
        if final.exists():
            raise FileExistsError(
                f"checkpoint {final} already exists: a step is saved once. Save under another step, or delete it first"
            )
        if rank == 0:
            _prepare_folder(root, partial)
    except (TypeError, ValueError, RuntimeError, OSError) as error:
        problem = error
    rows = all_gather_ints([problem is not None, step if isinstance(step, int) else -1], group)
    _discard_if_any_failed(rows, rank, partial)
    _raise_if_any_failed("save_checkpoint", rows, problem, "nothing was written")
    if len({row[1] for row in rows}) > 1:
        steps = ", ".join(f"rank {r}: {row[1]}" for r, row in enumerate(rows))
        raise ValueError(f"save_checkpoint: the ranks passed different steps ({steps}); pass the same on every rank")

    size, digest = 0, bytes(32)
    try:
        size, digest = _write_file(partial / _rank_file(rank), payload)
    except OSError as error:
        problem = error
    rows = all_gather_ints([problem is not None, size, *_digest_words(digest)], group)
    _discard_if_any_failed(rows, rank, partial)
    _raise_if_any_failed("save_checkpoint", rows, problem, "the earlier checkpoints are untouched")

    if rank == 0:
        files = {
            _rank_file(r): {"bytes": row[1], "sha256": _words_digest(row[2 : 2 + _DIGEST_WORDS]).hex()}
            for r, row in enumerate(rows)
        }
        try:
            _commit(root, partial, final, _manifest(step, optimizer, metadata, files))
        except OSError as error:
            problem = error
    rows = all_gather_ints([problem is not None], group)
    _raise_if_any_failed("save_checkpoint", rows, problem, "the earlier checkpoints are untouched")
    if rank == 0 and keep_last is not None:
        try:
            _delete_all_but_last(root, keep_last)
        except OSError as error:  # the save itself succeeded
            warnings.warn(f"checkpoint {final} is saved, but deleting the older ones failed: {error}", stacklevel=2)
    return final


def load_checkpoint(
    directory: str | os.PathLike,
    model: nn.Module,
    optimizer: ShardedOptimizer,
    *,
    step: int | None = None,
) -> CheckpointInfo:
    """Load checkpoint ``step`` (default: the latest) of ``directory`` into ``model`` and ``optimizer`` (a collective).

    Call it on every rank, with the model and optimizer built as for the save
    (the same parameters in the same order), at any world size. Everything is
    checked first (see :mod:`zero1.checkpoint_files`); a problem on any rank is
    reported on every rank and nothing is loaded.

    Returns:
        The checkpoint's :class:`CheckpointInfo` (its step and metadata).

    Raises:
        FileNotFoundError: no committed checkpoint (at ``step``) in ``directory``.
        CheckpointError: the checkpoint is incomplete or corrupt (a file missing,
            truncated, empty, or with other bytes than saved; files of different
            steps); the message names each file and what is wrong.
        ValueError: the model or optimizer has other parameters than the saved
            ones (the message names them).

    Example::

        done = 0  # steps taken
        if list_checkpoints("ckpt"):
            done = load_checkpoint("ckpt", model.module, optimizer).step
    """
    if not isinstance(optimizer, ShardedOptimizer):
        raise TypeError(f"optimizer must be a zero1.ShardedOptimizer, got {type(optimizer).__name__}")
    group, rank, world_size = optimizer.process_group, optimizer.rank, optimizer.world_size
    problem: BaseException | None = None
    info: CheckpointInfo | None = None
    manifest: dict[str, Any] = {}
    try:
        info, manifest = _read_manifest(_find(directory, step))
        _check_optimizer_fits(manifest, optimizer)
    except (OSError, CheckpointError, ValueError) as error:
        problem = error
    found = (info.step, info.world_size) if info is not None else (-1, -1)
    rows = all_gather_ints([problem is not None, *found], group)
    _raise_if_any_failed("load_checkpoint", rows, problem, "nothing was loaded")
    if len({tuple(row[1:]) for row in rows}) > 1:
        seen = ", ".join(f"rank {r}: step {row[1]}" for r, row in enumerate(rows))
        raise CheckpointError(f"load_checkpoint: the ranks found different checkpoints ({seen}); nothing was loaded")

    # The ranks split the files, hash theirs, and sum their reports (each file has one reporter).
    names = sorted(manifest["files"])
    report = torch.zeros(len(names), 2, dtype=torch.int64)
    for i in range(rank, len(names), world_size):
        report[i] = torch.tensor(_check_file(info.path / names[i], manifest["files"][names[i]]))
    report = report.to(collective_device(group))
    dist.all_reduce(report, group=group)
    _raise_if_corrupt(info.path, manifest, list(zip(names, report.tolist())))

    try:
        files = [_load_file(info.path, name) for name in names]
        _check_files_agree(info, manifest, files)
        model_state = {key: value for file in files for key, value in file["model"].items()}
        _check_model_fits(model, model_state)
        shards = [file["optimizer"] for file in files]
        mine = shard_of(
            merge_sharded_state_dicts(shards),
            optimizer.owners,
            rank,
            world_size,
            shards[0][SHARD_KEY]["step"],
        )
        # Copies: the loaded tensors are views of the files, mapped into memory.
        mine["state"] = {i: {k: _copied(v) for k, v in s.items()} for i, s in mine["state"].items()}
    except (OSError, CheckpointError, ValueError) as error:
        problem = error
    rows = all_gather_ints([problem is not None], group)
    _raise_if_any_failed("load_checkpoint", rows, problem, "nothing was loaded")

    model.load_state_dict(model_state)
    optimizer.load_state_dict(mine)
    return info


def verify_checkpoint(directory: str | os.PathLike, step: int | None = None) -> CheckpointInfo:
    """Check checkpoint ``step`` (default: the latest) of ``directory`` as a load would, in this process alone.

    Reads the manifest and every file (its size and SHA-256); no process group
    is needed. Returns its :class:`CheckpointInfo`.

    Raises:
        FileNotFoundError: no committed checkpoint (at ``step``).
        CheckpointError: it is incomplete or corrupt; the message names each file.
    """
    return _verified(directory, step)[0]


def read_checkpoint(
    directory: str | os.PathLike, step: int | None = None
) -> tuple[dict[str, Any], dict[str, Any], CheckpointInfo]:
    """The model state dict and consolidated optimizer state dict of a checkpoint, in this process alone.

    Verifies it as :func:`verify_checkpoint` does. The optimizer state dict is
    the wrapped class's own layout: it loads into the plain optimizer (e.g.
    ``torch.optim.AdamW``) over the same parameters, in one process. Tensors
    are mapped from the files into memory (``torch.load(mmap=True)``) and on the CPU.

    Returns:
        ``(model_state_dict, optimizer_state_dict, info)``.
    """
    info, manifest = _verified(directory, step)
    files = [_load_file(info.path, name) for name in sorted(manifest["files"])]
    _check_files_agree(info, manifest, files)
    model_state = {key: value for file in files for key, value in file["model"].items()}
    return model_state, merge_sharded_state_dicts([file["optimizer"] for file in files]), info


# ---------------------------------------------------------------------- layout


def _step_folder(root: Path, step: int) -> Path:
    return root / f"step_{step:0{_STEP_DIGITS}d}"


def _partial_folder(root: Path, step: int) -> Path:
    return root / f".step_{step:0{_STEP_DIGITS}d}.partial"


def _rank_file(rank: int) -> str:
    return f"rank_{rank:05d}.pt"


# ---------------------------------------------------------------------- saving


def _check_step(step: object) -> None:
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < 10**_STEP_DIGITS:
        raise ValueError(f"step must be an int in 0..{10**_STEP_DIGITS - 1}, got {step!r}")


def _json_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """``metadata`` as JSON will give it back; raises TypeError if JSON cannot hold it."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a dict (or None), got {type(metadata).__name__}")
    try:
        return json.loads(json.dumps(dict(metadata)))
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"metadata must hold only what JSON can (numbers, strings, bools, None, lists, dicts with string "
            f"keys): {error}"
        ) from error


def _rank_payload(model: nn.Module, optimizer: ShardedOptimizer, step: int) -> dict[str, Any]:
    """What this rank saves: its optimizer shard and the model entries it writes (see the module docstring)."""
    shard = optimizer.sharded_state_dict()  # raises if a step() left the state torn
    index = {id(p): i for i, p in enumerate(p for g in optimizer.param_groups for p in g["params"])}
    model_entries = {}
    for name, value in model.state_dict(keep_vars=True).items():
        writer = optimizer.owners[index[id(value)]] if id(value) in index else 0
        if writer == optimizer.rank:
            model_entries[name] = value.detach() if isinstance(value, torch.Tensor) else value
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "step": step,
        "rank": optimizer.rank,
        "world_size": optimizer.world_size,
        "model": model_entries,
        "optimizer": shard,
    }


def _manifest(
    step: int, optimizer: ShardedOptimizer, metadata: dict[str, Any], files: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The manifest's content; ``files`` maps each rank's file name to its ``bytes`` and ``sha256``."""
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "step": step,
        "world_size": optimizer.world_size,
        "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "metadata": metadata,
        "optimizer": {
            "class": type(optimizer.local_optimizer).__qualname__,
            "owners": list(optimizer.owners),
            "parameters": _parameter_layout(optimizer),
        },
        "files": files,
    }


def _parameter_layout(optimizer: ShardedOptimizer) -> list[list[Any]]:
    """``[shape, dtype]`` of each of the optimizer's parameters, in ``param_groups`` order."""
    return [[list(p.shape), str(p.dtype)] for g in optimizer.param_groups for p in g["params"]]


def _prepare_folder(root: Path, partial: Path) -> None:
    """Rank 0, before anything is written: remove interrupted saves; create ``partial``."""
    root.mkdir(parents=True, exist_ok=True)
    for leftover in root.glob(".step_*"):  # interrupted saves and deletions; one job per folder
        shutil.rmtree(leftover, ignore_errors=True)
    partial.mkdir()


class _HashingWriter:
    """A write-only file object that hashes what passes through it (``torch.save`` writes sequentially)."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.size += len(data)
        return self._file.write(data)

    def flush(self) -> None:
        self._file.flush()


def _write_file(path: Path, payload: dict[str, Any]) -> tuple[int, bytes]:
    """``torch.save`` ``payload`` to a new file, fsynced; returns its size in bytes and its SHA-256."""
    with open(path, "xb") as file:
        writer = _HashingWriter(file)
        torch.save(payload, writer)
        file.flush()
        os.fsync(file.fileno())
    return writer.size, writer.sha256.digest()


def _discard_if_any_failed(rows: list[list[int]], rank: int, partial: Path | None) -> None:
    """Rank 0 removes the partial folder of a save that some rank could not go on with."""
    if rank == 0 and partial is not None and any(row[0] for row in rows):
        shutil.rmtree(partial, ignore_errors=True)


def _commit(root: Path, partial: Path, final: Path, manifest: dict[str, Any]) -> None:
    """Rank 0: the manifest, last (temporary name, fsync, rename); then the folder's rename, the commit."""
    temporary = partial / f"{MANIFEST}.tmp"
    with open(temporary, "w") as file:
        json.dump(manifest, file, indent=1)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, partial / MANIFEST)
    _fsync_folder(partial)
    os.rename(partial, final)
    _fsync_folder(root)


def _delete_all_but_last(root: Path, keep_last: int) -> None:
    """Delete the committed checkpoints older than the newest ``keep_last`` (each hidden first, then removed)."""
    for old in list_checkpoints(root)[:-keep_last]:
        doomed = root / f".{_step_folder(root, old).name}.deleting"
        os.rename(_step_folder(root, old), doomed)
        shutil.rmtree(doomed)


def _fsync_folder(folder: Path) -> None:
    """Make a folder's entries (created, renamed files) durable; a no-op where folders cannot be opened."""
    if not hasattr(os, "O_DIRECTORY"):  # Windows
        return
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _digest_words(digest: bytes) -> list[int]:
    return [int.from_bytes(digest[i : i + 8], "little", signed=True) for i in range(0, 32, 8)]


def _words_digest(words: list[int]) -> bytes:
    return b"".join(word.to_bytes(8, "little", signed=True) for word in words)


# ---------------------------------------------------------------------- loading


def _find(directory: str | os.PathLike, step: int | None) -> Path:
    """The folder of committed checkpoint ``step`` (``None``: the latest) of ``directory``."""
    steps = list_checkpoints(directory)
    if step is None and steps:
        return _step_folder(Path(directory), steps[-1])
    if step is not None and step in steps:
        return _step_folder(Path(directory), step)
    wanted = "any committed checkpoint" if step is None else f"a committed checkpoint at step {step}"
    raise FileNotFoundError(f"{directory} holds no {wanted} (committed steps: {steps or 'none'})")


def _corrupt(folder: Path, what: str) -> CheckpointError:
    return CheckpointError(
        f"checkpoint {folder} is incomplete or corrupt: {what}. Load an earlier step "
        f"(zero1.list_checkpoints lists them) or save again"
    )


def _read_manifest(folder: Path) -> tuple[CheckpointInfo, dict[str, Any]]:
    """Read and check ``folder``'s manifest; returns it and the checkpoint's :class:`CheckpointInfo`."""
    try:
        text = (folder / MANIFEST).read_text()
    except FileNotFoundError:
        raise _corrupt(folder, f"it has no {MANIFEST}") from None
    try:
        manifest = json.loads(text)
    except ValueError as error:
        raise _corrupt(folder, f"{MANIFEST} is not valid JSON ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _corrupt(folder, f"{MANIFEST} is not a {FORMAT} manifest")
    if manifest.get("version") != FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {folder} has format version {manifest.get('version')!r}; this zero1 reads version "
            f"{FORMAT_VERSION}: load it with the zero1 that saved it"
        )
    try:
        step, world_size, files = manifest["step"], manifest["world_size"], manifest["files"]
        owners, parameters = manifest["optimizer"]["owners"], manifest["optimizer"]["parameters"]
        metadata = manifest["metadata"]
        entries_ok = all(isinstance(files[_rank_file(r)]["bytes"], int) for r in range(world_size))
    except (KeyError, TypeError) as error:
        raise _corrupt(folder, f"{MANIFEST} lacks the entry {error}") from None
    if folder.name != _step_folder(folder.parent, step).name:
        raise _corrupt(folder, f"{MANIFEST} records step {step}, the folder another")
    if not entries_ok or len(files) != world_size:
        raise _corrupt(folder, f"{MANIFEST} does not list exactly one file per rank 0..{world_size - 1}")
    if len(owners) != len(parameters) or any(not 0 <= owner < world_size for owner in owners):
        raise _corrupt(folder, f"{MANIFEST}'s partition does not fit its {world_size} ranks and parameters")
    return CheckpointInfo(folder, step, world_size, metadata), manifest


def _check_file(path: Path, entry: Mapping[str, Any]) -> tuple[int, int]:
    """(state code, detail) of one file against its manifest entry; the detail is the size found, if wrong."""
    try:
        size = path.stat().st_size
        if size != entry["bytes"]:
            return _FILE_WRONG_SIZE, size
        digest = hashlib.sha256()
        with open(path, "rb") as file:
            while chunk := file.read(_READ_CHUNK_BYTES):
                digest.update(chunk)
    except FileNotFoundError:
        return _FILE_MISSING, 0
    except OSError as error:
        return _FILE_UNREADABLE, error.errno or 0
    return (_FILE_OK, 0) if digest.hexdigest() == entry["sha256"] else (_FILE_WRONG_HASH, 0)


def _raise_if_corrupt(
    folder: Path, manifest: Mapping[str, Any], reports: list[tuple[str, tuple[int, int] | list[int]]]
) -> None:
    """Raise :class:`CheckpointError` naming every file whose report (see :func:`_check_file`) is not OK."""
    problems = []
    for name, (code, detail) in reports:
        if code == _FILE_MISSING:
            problems.append(f"{name} is missing")
        elif code == _FILE_UNREADABLE:
            problems.append(f"{name} cannot be read ({os.strerror(detail) if detail else 'error'})")
        elif code == _FILE_WRONG_SIZE:
            problems.append(f"{name} has {detail} bytes, the manifest records {manifest['files'][name]['bytes']}")
        elif code == _FILE_WRONG_HASH:
            problems.append(f"{name}'s SHA-256 differs from the manifest's (its bytes changed since the save)")
    if problems:
        raise _corrupt(folder, "; ".join(problems))


def _verified(directory: str | os.PathLike, step: int | None) -> tuple[CheckpointInfo, dict[str, Any]]:
    """The checkpoint's info and manifest, once every one of its files is checked in this process."""
    info, manifest = _read_manifest(_find(directory, step))
    names = sorted(manifest["files"])
    _raise_if_corrupt(info.path, manifest, [(n, _check_file(info.path / n, manifest["files"][n])) for n in names])
    return info, manifest


def _load_file(folder: Path, name: str) -> dict[str, Any]:
    """One rank's file, its tensors mapped from the file into memory."""
    try:
        return torch.load(folder / name, map_location="cpu", mmap=True, weights_only=True)
    except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError) as error:
        raise _corrupt(folder, f"{name} cannot be read by torch.load ({type(error).__name__}: {error})") from None


def _check_files_agree(info: CheckpointInfo, manifest: Mapping[str, Any], files: list[dict[str, Any]]) -> None:
    """Each file must be its rank's, of the manifest's step, world size and partition."""
    owners = manifest["optimizer"]["owners"]
    for rank, file in enumerate(files):
        name = _rank_file(rank)
        shard = file.get("optimizer", {}).get(SHARD_KEY, {})
        step, its_rank, world_size = file.get("step"), file.get("rank"), file.get("world_size")
        if (step, its_rank, world_size, shard.get("owners")) != (info.step, rank, info.world_size, owners):
            partition = "" if shard.get("owners") == owners else " with another partition"
            raise _corrupt(
                info.path,
                f"{name} records step {step}, rank {its_rank} of {world_size}{partition}; the manifest: step "
                f"{info.step}, rank {rank} of {info.world_size}",
            )
    steps = [file["optimizer"][SHARD_KEY].get("step") for file in files]
    if len(set(steps)) > 1:
        described = ", ".join(f"{_rank_file(r)}: {s}" for r, s in enumerate(steps))
        raise _corrupt(info.path, f"its optimizer shards were taken after different numbers of steps ({described})")


def _check_optimizer_fits(manifest: Mapping[str, Any], optimizer: ShardedOptimizer) -> None:
    saved, here = manifest["optimizer"]["parameters"], _parameter_layout(optimizer)
    if saved == here:
        return
    if len(saved) != len(here):
        raise ValueError(
            f"the optimizer has {len(here)} parameters, the checkpoint {len(saved)}: build the model and the "
            "optimizer as for the save"
        )
    index = next(i for i, (a, b) in enumerate(zip(saved, here)) if a != b)
    raise ValueError(
        f"the optimizer's parameter {index} (in param_groups order) is {tuple(here[index][0])} {here[index][1]}, "
        f"the checkpoint's {tuple(saved[index][0])} {saved[index][1]}: build the model and the optimizer as for "
        "the save (the same parameters in the same order)"
    )


def _check_model_fits(model: nn.Module, saved: Mapping[str, Any]) -> None:
    """The model's state dict must have the saved keys, and the saved shapes."""
    expected = model.state_dict()
    missing = [key for key in expected if key not in saved]
    unexpected = [key for key in saved if key not in expected]
    if missing or unexpected:
        hint = ""
        if all(key.startswith("module.") for key in unexpected) and unexpected:
            hint = " (it was saved from a wrapper: pass the wrapper, or its .module on both sides)"
        elif all(key.startswith("module.") for key in missing) and missing:
            hint = " (this model is a wrapper and the checkpoint was saved from the bare module: pass .module)"
        raise ValueError(
            f"the model's state dict does not match the checkpoint's{hint}: missing in the checkpoint "
            f"{_names(missing)}; not in the model {_names(unexpected)}"
        )
    shapes = [
        f"{key} {tuple(value.shape)} here, {tuple(saved[key].shape)} saved"
        for key, value in expected.items()
        if isinstance(value, torch.Tensor) and isinstance(saved[key], torch.Tensor) and value.shape != saved[key].shape
    ]
    if shapes:
        raise ValueError(f"the model's state dict has other shapes than the checkpoint's: {_names(shapes)}")


def _names(items: list[str]) -> str:
    shown = ", ".join(items[:_MAX_NAMES_SHOWN]) or "none"
    return shown + (f", ... ({len(items) - _MAX_NAMES_SHOWN} more)" if len(items) > _MAX_NAMES_SHOWN else "")


def _copied(value: Any) -> Any:
    return value.clone() if isinstance(value, torch.Tensor) else value


def _raise_if_any_failed(what: str, rows: list[list[int]], problem: BaseException | None, outcome: str) -> None:
    """Raise on every rank if any rank's row starts with a failure flag.

    A failing rank raises its own error; the others one that names the failing ranks.
    """
    failed = [rank for rank, row in enumerate(rows) if row[0]]
    if problem is not None:
        raise problem
    if failed:
        raise RuntimeError(f"{what} failed on ranks {failed} (their errors say why); {outcome}")
