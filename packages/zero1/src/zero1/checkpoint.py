"""The two checkpoint forms of a :class:`~zero1.ShardedOptimizer` and how a set of shards becomes one.

Consolidated form: exactly what the wrapped optimizer class returns from its own
``state_dict()`` when it optimizes all parameters in one process::

    {"state": {index: {name: value, ...}, ...},
     "param_groups": [{option: value, ..., "params": [index, ...]}, ...]}

Parameters are numbered 0, 1, 2, ... in the order of the parameter groups and of
the parameters within each group. It loads into a plain ``optimizer_cls`` and into
a ``ShardedOptimizer`` at any world size.

Sharded form: one per rank, the same layout restricted to the state of the
parameters that rank owns, plus a ``"zero1_shard"`` entry that records the
partition and the number of steps taken
(``{"rank": r, "world_size": n, "owners": [rank of each index], "step": s}``).
It loads back only at the same world size and partition; to change world size,
merge the shards with :func:`merge_sharded_state_dicts` (no processes needed),
or save and load with :func:`zero1.save_checkpoint` / :func:`zero1.load_checkpoint`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["SHARD_KEY", "merge_sharded_state_dicts", "shard_of"]

SHARD_KEY = "zero1_shard"


def merge_sharded_state_dicts(shards: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Merge the per-rank sharded state dicts of every rank into the consolidated form.

    Arguments:
        shards: the ``sharded_state_dict()`` of every rank, in any order (one per
            rank of one run, all taken after the same step).

    Returns:
        The consolidated state dict (``{"state", "param_groups"}``); tensors are the
        shards' own objects, not copies.

    Raises:
        ValueError: not one shard per rank, shards of different partitions, or
            shards taken after different numbers of steps (the message names
            each rank's step).

    Example::

        shards = [torch.load(f"optim-rank{r}.pt") for r in range(4)]
        torch.save(merge_sharded_state_dicts(shards), "optim.pt")
    """
    if not shards:
        raise ValueError("shards must hold the sharded state dict of every rank, got none")
    for shard in shards:
        if not isinstance(shard, Mapping) or SHARD_KEY not in shard:
            raise ValueError(
                f"each entry of shards must be a ShardedOptimizer.sharded_state_dict() "
                f"(a dict with a {SHARD_KEY!r} entry), got {type(shard).__name__}"
            )
    layout = shards[0][SHARD_KEY]
    world_size, owners = layout["world_size"], list(layout["owners"])
    ranks = sorted(shard[SHARD_KEY]["rank"] for shard in shards)
    if ranks != list(range(world_size)):
        raise ValueError(f"shards must hold exactly one state dict per rank 0..{world_size - 1}, got ranks {ranks}")
    if any(list(shard[SHARD_KEY]["owners"]) != owners for shard in shards):
        raise ValueError("shards come from different partitions (their 'owners' lists differ)")
    steps = {shard[SHARD_KEY]["rank"]: shard[SHARD_KEY].get("step") for shard in shards}
    if len(set(steps.values())) > 1:
        described = ", ".join(f"rank {rank}: {step}" for rank, step in sorted(steps.items()))
        raise ValueError(
            f"shards were taken after different numbers of steps ({described}), e.g. by a save interrupted "
            "part-way; merge shards saved together (zero1.save_checkpoint commits them at once)"
        )

    state: dict[int, Any] = {}
    for shard in shards:
        rank = shard[SHARD_KEY]["rank"]
        for index, param_state in shard["state"].items():
            if owners[index] != rank:
                raise ValueError(
                    f"shard of rank {rank} holds state for parameter {index}, owned by rank {owners[index]}"
                )
            state[index] = param_state
    return {"state": dict(sorted(state.items())), "param_groups": [dict(g) for g in shards[0]["param_groups"]]}


def shard_of(
    consolidated: Mapping[str, Any], owners: Sequence[int], rank: int, world_size: int, step: int | None
) -> dict[str, Any]:
    """The sharded state dict of ``rank`` under the partition ``owners``, cut from a consolidated one.

    This is how shards saved at one world size are loaded at another: merge
    them, then cut each new rank's shard out of the result.

    Arguments:
        consolidated: ``{"state", "param_groups"}``, e.g. from :func:`merge_sharded_state_dicts`.
        owners: the owner rank of each parameter index (``ShardedOptimizer.owners``).
        rank: the rank whose shard to cut.
        world_size: the number of ranks of the partition.
        step: the number of steps the state has taken, recorded in the shard.

    Returns:
        ``{"state", "param_groups", "zero1_shard"}``; tensors are ``consolidated``'s own.
    """
    return {
        "state": {index: value for index, value in consolidated["state"].items() if owners[index] == rank},
        "param_groups": [dict(group) for group in consolidated["param_groups"]],
        SHARD_KEY: {"rank": rank, "world_size": world_size, "owners": list(owners), "step": step},
    }
