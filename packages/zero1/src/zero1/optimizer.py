"""ZeRO stage 1: each rank keeps optimizer state for, and updates, only its share of the parameters.

ZeRO (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
Parameter Models", SC 2020) stage 1 partitions the optimizer state across the
data-parallel ranks. Gradients are still complete on every rank (a data-parallel
wrapper has all-reduced them), so each rank runs the wrapped optimizer's own
update on the parameters it owns and then sends the new values to the others.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from itertools import chain
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.optim import Optimizer

from zero1.broadcast import BROADCAST_MODES, ParameterBroadcaster
from zero1.checkpoint import SHARD_KEY, merge_sharded_state_dicts
from zero1.gather import all_gather_ints, gather_objects
from zero1.partition import partition_parameters

__all__ = ["ShardedOptimizer"]

# Group entries that describe the parameters themselves rather than options of the update.
_PARAM_KEYS = ("params", "param_names")


# Integer dtypes by element size, through which a parameter's bit patterns are summed exactly.
_BITS_AS_INTEGERS = {1: torch.uint8, 2: torch.int16, 4: torch.int32}


def _digest(text: str) -> int:
    """A 64-bit hash of ``text`` as a signed integer (it travels in an int64 tensor)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little", signed=True)


def _value_fingerprints(params: list[torch.Tensor]) -> list[int]:
    """For each parameter, the sum of its elements' bit patterns read as integers (exact; 0 on the meta device).

    Equal on every rank for a parameter that holds the same values there, and
    in practice different for parameters with different values: what tells
    same-shaped parameters apart when they come without names.
    """
    sums: list[int] = [0] * len(params)
    by_device: dict[torch.device, list[int]] = {}
    for index, param in enumerate(params):
        if param.device.type != "meta" and param.numel() > 0:
            by_device.setdefault(param.device, []).append(index)
    for indices in by_device.values():
        totals = []
        for index in indices:
            param = params[index]
            as_integers = _BITS_AS_INTEGERS.get(param.element_size(), torch.int64)
            bits = param.detach().reshape(-1).view(torch.uint8).view(as_integers)
            totals.append(bits.sum(dtype=torch.int64))
        for index, total in zip(indices, torch.stack(totals).tolist()):
            sums[index] = total
    return sums


def _order_digests(values: list[int]) -> list[int]:
    """Hashes of fingerprints in order and sorted: the same sorted but not in order on some rank
    means the same parameters in another order (see :func:`_reordered`)."""
    return [_digest(repr(values)), _digest(repr(sorted(values)))]


def _reordered(rows: list[list[int]], column: int) -> list[list[int]] | None:
    """From the all-gathered :func:`_order_digests` at ``column`` of each rank's row: the groups
    of ranks that agree on the order, if every rank holds the same fingerprints but not every
    rank in the same order; else None."""
    in_order, as_sets = [row[column] for row in rows], [row[column + 1] for row in rows]
    return _agreeing(in_order) if len(set(in_order)) > 1 and len(set(as_sets)) == 1 else None


def _state_weight(param: torch.Tensor) -> int:
    """What ``param`` weighs in the partition: its element count, or 0 if it is frozen.

    A parameter with ``requires_grad=False`` (when its group is added) gets no
    gradient, so the wrapped optimizer never allocates state for it; counting it
    would leave its owner with less of the real state than the others.
    """
    return param.numel() if param.requires_grad else 0


class ShardedOptimizer(Optimizer):
    r"""Wraps any per-parameter optimizer so that its state is sharded across ranks (ZeRO-1).

    Every parameter is owned by exactly one rank of ``process_group``
    (:func:`zero1.partition_parameters`: largest first onto the least-loaded rank,
    by element count, frozen parameters counting 0, identical on every rank). Each rank builds ``optimizer_cls``
    over the parameters it owns only, so the state of the other parameters is never
    allocated: with AdamW (two tensors per parameter, like the parameter) a rank
    holds at most ``2 * (P / N + largest parameter)`` elements of state instead of ``2 * P``.

    :meth:`step` runs the wrapped optimizer on the local shard and then broadcasts
    every updated parameter from its owner, so all ranks hold the same full model
    again. Given identical gradients on every rank (what a data-parallel wrapper
    produces), the parameters are bitwise identical to those of the unsharded
    ``optimizer_cls``, because the update is that class's own arithmetic.

    ``param_groups`` lists all parameters with their full options (as the unsharded
    optimizer's would); change options there (learning-rate schedulers do) and the
    next :meth:`step` uses them. ``state`` holds the state of this rank's
    parameters only. :meth:`zero_grad` clears the gradients of all parameters.

    Arguments:
        params (iterable): tensors, or dicts defining parameter groups with
            per-group options, as for any ``torch.optim`` optimizer.
        optimizer_cls (type): a ``torch.optim.Optimizer`` subclass whose update of
            each parameter depends only on that parameter, its gradient and its
            state (SGD, Adam, AdamW, RMSprop, Adagrad, ...; LBFGS is refused).
        process_group (ProcessGroup, optional): the data-parallel group
            (default: the default group, which must be initialized).
        broadcast_mode (str): ``"bucketed"`` (default): each owner's parameters of
            one dtype are packed into flat buckets and sent with one broadcast per
            bucket; ``"per_parameter"``: one broadcast per parameter, in place.
        bucket_size_mb (float or None): bucket cap in MiB for ``"bucketed"``
            (default 25.0, the default of PyTorch DDP's buckets); ``None`` packs all
            of an owner's parameters of one dtype into one bucket. At most two
            buckets are staged at once.
        **defaults: options passed to ``optimizer_cls`` (``lr``, ``betas``,
            ``momentum``, ``foreach``, ...).

    Checkpoints come in two forms (see :mod:`zero1.checkpoint`):

    - consolidated: call :meth:`consolidate_state_dict` on every rank, then
      :meth:`state_dict` on the destination rank returns the dict a plain
      ``optimizer_cls`` would; it loads into ``optimizer_cls`` and into a
      ``ShardedOptimizer`` at any world size. At world size 1,
      :meth:`state_dict` needs no consolidation.
    - sharded: :meth:`sharded_state_dict` on each rank, no communication; loads
      back at the same world size, or merges into the consolidated form with
      :func:`zero1.merge_sharded_state_dicts`.

    :meth:`load_state_dict` accepts both.

    .. note:: When an optimizer option ``foreach`` is left at ``None``, the
        wrapped optimizer chooses its implementation from the tensors it is given.
        Sharding gives it fewer tensors, so to make the same choice as the
        unsharded optimizer every group's parameters must share one device type
        and be plain tensors (not subclasses); otherwise construction raises and
        asks for an explicit ``foreach``. (The for-loop and fused implementations can differ in the last
        bit; a reference must use the same options to compare bitwise.)

    Example::

        >>> # on each of N ranks, after torch.distributed.init_process_group(...)
        >>> model = ddp.BucketedDDP(MyModel().to(device))
        >>> optimizer = ShardedOptimizer(model.parameters(), torch.optim.AdamW, lr=1e-3)
        >>> for batch, target in loader:  # each rank its own slice of the batch
        ...     optimizer.zero_grad()
        ...     loss_fn(model(batch), target).backward()
        ...     model.finish_gradient_synchronization()
        ...     optimizer.step()
        >>> optimizer.consolidate_state_dict(to=0)
        >>> if torch.distributed.get_rank() == 0:
        ...     torch.save(optimizer.state_dict(), "optimizer.pt")
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        optimizer_cls: type[Optimizer],
        *,
        process_group: dist.ProcessGroup | None = None,
        broadcast_mode: str = "bucketed",
        bucket_size_mb: float | None = 25.0,
        **defaults: Any,
    ) -> None:
        if not (isinstance(optimizer_cls, type) and issubclass(optimizer_cls, Optimizer)):
            raise TypeError(
                f"optimizer_cls must be a torch.optim.Optimizer subclass such as torch.optim.AdamW, "
                f"got {optimizer_cls!r}"
            )
        if issubclass(optimizer_cls, ShardedOptimizer):
            raise TypeError("optimizer_cls must be the optimizer to shard, not ShardedOptimizer itself")
        if issubclass(optimizer_cls, torch.optim.LBFGS):
            raise TypeError(
                "optimizer_cls=LBFGS cannot be sharded: its update of each parameter depends on all of them "
                "(one flat vector of the whole model, and a line search over it)"
            )
        if broadcast_mode not in BROADCAST_MODES:
            raise ValueError(f"broadcast_mode must be one of {BROADCAST_MODES}, got {broadcast_mode!r}")
        if bucket_size_mb is not None and not (isinstance(bucket_size_mb, (int, float)) and bucket_size_mb > 0):
            raise ValueError(f"bucket_size_mb must be a number > 0 or None, got {bucket_size_mb!r}")
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError(
                "ShardedOptimizer needs an initialized process group: call "
                "torch.distributed.init_process_group(...) first (world size 1 is fine)"
            )

        self._process_group = process_group
        self._rank = dist.get_rank(process_group)
        if self._rank < 0:  # what get_rank returns outside the group
            raise ValueError(
                f"this process (global rank {dist.get_rank()}) is not a member of process_group: "
                "create the ShardedOptimizer on the group's ranks only"
            )
        self._world_size = dist.get_world_size(process_group)
        self._broadcast_mode = broadcast_mode
        self._bucket_bytes = None if bucket_size_mb is None else int(bucket_size_mb * 2**20)
        self._owners: list[int] = []  # owner rank of each parameter, in param_groups order
        self._local: Optimizer | None = None
        self._pending_local_groups: list[dict[str, Any]] = []
        self._consolidated: dict[str, Any] | None = None
        # Completed step() calls since construction, or since the state was loaded from
        # shards that recorded them; recorded in every shard, so that shards of different
        # steps are told apart.
        self._steps_taken = 0
        # Why no checkpoint may be taken: a step() that raised may have left this rank's
        # parameters from two different steps (its own shard updated, others' broadcasts not).
        self._torn: str | None = None
        # Whether the first step() has compared the gradients' order across ranks.
        self._gradient_order_checked = False

        super().__init__(params, defaults)  # calls self.add_param_group once per group

        self._local = optimizer_cls(self._pending_local_groups, **defaults)
        del self._pending_local_groups
        # The wrapped class's defaults (betas, momentum, ...), not only those passed here:
        # learning-rate schedulers such as OneCycleLR look for them.
        self.defaults = dict(self._local.defaults)
        for index in range(len(self.param_groups)):
            self._adopt_options(index)
        self.state = self._local.state
        self._broadcaster = self._build_broadcaster()

    # ------------------------------------------------------------------ layout

    @property
    def rank(self) -> int:
        """This process's rank in the process group."""
        return self._rank

    @property
    def world_size(self) -> int:
        """Number of ranks sharing the optimizer state."""
        return self._world_size

    @property
    def process_group(self) -> dist.ProcessGroup | None:
        """The data-parallel group (``None``: the default group)."""
        return self._process_group

    @property
    def steps_taken(self) -> int:
        """Completed :meth:`step` calls.

        Counted from construction, or from the count that the shards last loaded
        recorded (a consolidated state dict records none: the count restarts at 0).
        """
        return self._steps_taken

    @property
    def owners(self) -> tuple[int, ...]:
        """The owner rank of each parameter, in ``param_groups`` order (groups, then parameters)."""
        return tuple(self._owners)

    @property
    def local_optimizer(self) -> Optimizer:
        """The ``optimizer_cls`` instance over this rank's parameters (one group per group)."""
        return self._local

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a parameter group; its parameters are placed on the least-loaded ranks.

        Works at any time; every rank must add the same groups in the same order
        (a collective: it checks that they do).

        Raises:
            ValueError: on every rank, if the group's parameters (number, names
                when given, shapes, dtypes, device types, ``requires_grad``, or
                their order) or the groups before it differ between ranks; the
                group is then not added.
        """
        loads = [0] * self._world_size  # elements each rank owns before this group
        for param, owner in zip(self._all_params(), self._owners, strict=True):
            loads[owner] += _state_weight(param)
        super().add_param_group(param_group)  # validates, fills in defaults, appends to param_groups
        group = self.param_groups[-1]
        try:
            self._check_same_group_on_every_rank(group)
        except ValueError:
            self.param_groups.pop()
            raise
        new_owners = partition_parameters([_state_weight(p) for p in group["params"]], self._world_size, loads)
        self._owners.extend(new_owners)
        local_group = {k: v for k, v in group.items() if k not in _PARAM_KEYS}
        local_group["params"] = [p for p, o in zip(group["params"], new_owners) if o == self._rank]

        if self._local is None:  # still in __init__: the local optimizer is built from all groups at once
            self._pending_local_groups.append(local_group)
            return
        self._local.add_param_group(local_group)
        self._adopt_options(len(self.param_groups) - 1)
        self._broadcaster = self._build_broadcaster()
        self._consolidated = None

    # ------------------------------------------------------------------ update

    def step(self, closure: Callable[[], float] | None = None, **kwargs: Any) -> Any:
        """Update this rank's parameters with the wrapped optimizer, then broadcast all of them.

        A collective: every rank must call it. ``closure`` and ``kwargs`` go to the
        wrapped optimizer's ``step`` (which calls ``closure`` on every rank, owning
        parameters or not). Returns what that ``step`` returns.

        If it raises (typically: a broadcast failed because a peer died or timed
        out), this rank's parameters may mix two steps, so every later
        :meth:`step`, :meth:`state_dict`, :meth:`sharded_state_dict` and
        :meth:`consolidate_state_dict` raises ``RuntimeError`` saying so, until
        :meth:`load_state_dict` replaces the state (load the model's parameters
        from the same checkpoint).
        """
        self._refuse_if_torn("step()")
        if not self._gradient_order_checked:
            self._check_gradient_order()
        self._consolidated = None
        for group, local_group in zip(self.param_groups, self._local.param_groups):
            local_group.update((k, v) for k, v in group.items() if k not in _PARAM_KEYS)
        try:
            loss = self._local.step(closure, **kwargs)
            if self._world_size > 1:
                self._broadcaster.broadcast()
        except BaseException as error:
            self._torn = (
                f"step() raised on this rank ({type(error).__name__}: {error}) after {self._steps_taken} "
                "completed steps, so its parameters may mix two steps (this rank's share updated, the "
                "broadcasts of the others' not received)"
            )
            raise
        self._steps_taken += 1
        return loss

    # ------------------------------------------------------------------ checkpoints

    def sharded_state_dict(self) -> dict[str, Any]:
        """This rank's part of the state (sharded form); no communication.

        Returns ``{"state", "param_groups", "zero1_shard"}``: ``state`` keyed by the
        global parameter index, only for parameters this rank owns; ``param_groups``
        with every group's options and all indices; ``zero1_shard`` the partition
        and :attr:`steps_taken` (``{"rank", "world_size", "owners", "step"}``).
        Tensors are the live state tensors, not copies (as in ``torch.optim``).

        Raises:
            RuntimeError: a :meth:`step` raised on this rank (see there).
        """
        self._refuse_if_torn("sharded_state_dict()")
        local = self._local.state_dict()
        local_to_global = [i for i, owner in enumerate(self._owners) if owner == self._rank]
        offsets = [0]
        for group in self.param_groups:
            offsets.append(offsets[-1] + len(group["params"]))
        param_groups = []
        for group, start, stop in zip(self.param_groups, offsets, offsets[1:]):
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = list(range(start, stop))
            param_groups.append(packed)
        return {
            "state": {local_to_global[i]: s for i, s in local["state"].items()},
            "param_groups": param_groups,
            SHARD_KEY: {
                "rank": self._rank,
                "world_size": self._world_size,
                "owners": list(self._owners),
                "step": self._steps_taken,
            },
        }

    def consolidate_state_dict(self, to: int = 0) -> None:
        """Collect the whole optimizer state on rank ``to`` (a collective: call it on every rank).

        Afterwards, and until the next :meth:`step`, :meth:`add_param_group` or
        :meth:`load_state_dict`, :meth:`state_dict` on rank ``to`` returns the
        consolidated form, with every tensor copied to CPU memory.

        Raises:
            RuntimeError: on rank ``to`` and on the failing ranks, if a
                :meth:`step` raised on any rank (see there).
        """
        if not isinstance(to, int) or not 0 <= to < self._world_size:
            raise ValueError(f"to must be a rank in 0..{self._world_size - 1}, got {to!r}")
        # A torn rank sends why instead of its shard: the collective still completes everywhere.
        mine = self._torn if self._torn is not None else _to_cpu(self.sharded_state_dict())
        shards = gather_objects(mine, to, self._process_group)
        self._refuse_if_torn("consolidate_state_dict()")
        if shards is None:
            return
        torn = [rank for rank, shard in enumerate(shards) if isinstance(shard, str)]
        if torn:
            raise RuntimeError(
                f"consolidate_state_dict(): ranks {torn} cannot give their state (rank {torn[0]}: "
                f"{shards[torn[0]]}); no checkpoint can be taken from this state. Resume from the last "
                "checkpoint instead"
            )
        self._consolidated = merge_sharded_state_dicts(shards)

    def state_dict(self) -> dict[str, Any]:
        """The consolidated state dict, loadable into plain ``optimizer_cls`` or any world size.

        At world size 1 it is available directly; otherwise call
        :meth:`consolidate_state_dict` on every rank first and this on its ``to`` rank.

        Raises:
            RuntimeError: no fresh consolidation, or a :meth:`step` raised on
                this rank (see there).
        """
        self._refuse_if_torn("state_dict()")
        if self._world_size == 1:
            return merge_sharded_state_dicts([self.sharded_state_dict()])
        if self._consolidated is None:
            raise RuntimeError(
                f"state_dict() on rank {self._rank} of {self._world_size}: the state is sharded. Call "
                f"consolidate_state_dict(to=r) on every rank after the last step, then state_dict() on "
                f"rank r; or save sharded_state_dict() on each rank"
            )
        return self._consolidated

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a consolidated state dict (any world size, or from plain ``optimizer_cls``) or this rank's shard.

        Call it on every rank: at world size > 1 it is a collective, in which the
        ranks agree before anything is loaded. From the consolidated form each
        rank keeps only the state of the parameters it owns. Options in the saved
        groups replace the current ones, as in ``torch.optim``. It clears the
        refusal left by a :meth:`step` that raised: load the model's parameters
        from the same checkpoint.

        Raises:
            TypeError, ValueError: on every rank (nothing is loaded anywhere) if
                some rank's state dict does not fit this optimizer (its shard is
                another rank's or another partition's; its groups have other
                sizes), if some ranks load shards and others a consolidated
                dict, or if the shards were taken after different steps (a save
                interrupted part-way); the message names the ranks and steps.
        """
        problem: Exception | None = None
        plan = None
        try:
            plan = self._plan_load(state_dict)
        except (TypeError, ValueError) as error:
            problem = error
        except KeyError as error:
            problem = ValueError(f"state_dict lacks the entry {error}: it is not an optimizer state dict")
        shard_step = plan[2] if plan is not None else None
        self._agree_on_load(problem, isinstance(state_dict, dict) and SHARD_KEY in state_dict, shard_step)

        options, local_dict, step = plan
        for group, group_options in zip(self.param_groups, options):
            group.update(group_options)
        self._local.load_state_dict(local_dict)
        self.state = self._local.state  # torch's load_state_dict replaced the dict
        self._consolidated = None
        self._torn = None
        self._steps_taken = step if step is not None else 0

    def _plan_load(self, state_dict: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any], int | None]:
        """Check ``state_dict`` against this optimizer, changing nothing.

        Returns each group's saved options, the wrapped optimizer's local state
        dict, and the step recorded in a shard (``None`` for the consolidated form).
        """
        if not isinstance(state_dict, dict) or not {"state", "param_groups"} <= state_dict.keys():
            raise TypeError(
                "state_dict must be an optimizer state dict with 'state' and 'param_groups', "
                f"got {type(state_dict).__name__}"
            )
        step = None
        if SHARD_KEY in state_dict:
            saved = state_dict[SHARD_KEY]
            if (saved["world_size"], saved["rank"], list(saved["owners"])) != (
                self._world_size,
                self._rank,
                self._owners,
            ):
                raise ValueError(
                    f"this sharded state dict is rank {saved['rank']} of {saved['world_size']} with another "
                    f"partition; this optimizer is rank {self._rank} of {self._world_size}. Load each rank's "
                    f"own shard at the same world size, or merge the shards with "
                    f"zero1.merge_sharded_state_dicts and load the consolidated dict"
                )
            step = saved.get("step")
        saved_groups = state_dict["param_groups"]
        if [len(g["params"]) for g in saved_groups] != [len(g["params"]) for g in self.param_groups]:
            raise ValueError(
                f"state_dict has groups of sizes {[len(g['params']) for g in saved_groups]}, "
                f"this optimizer {[len(g['params']) for g in self.param_groups]}"
            )
        position = {saved_id: i for i, saved_id in enumerate(chain.from_iterable(g["params"] for g in saved_groups))}
        owned = [i for i, owner in enumerate(self._owners) if owner == self._rank]
        local_index = {global_index: i for i, global_index in enumerate(owned)}

        options, local_groups, local_state = [], [], {}
        for saved_group in saved_groups:
            group_options = {k: v for k, v in saved_group.items() if k not in _PARAM_KEYS}
            options.append(group_options)
            ids = [saved_id for saved_id in saved_group["params"] if position[saved_id] in local_index]
            local_groups.append({**group_options, "params": [local_index[position[i]] for i in ids]})
            for saved_id in ids:
                if saved_id in state_dict["state"]:
                    local_state[local_index[position[saved_id]]] = state_dict["state"][saved_id]
        return options, {"state": local_state, "param_groups": local_groups}, step

    def _agree_on_load(self, problem: Exception | None, is_shard: bool, step: int | None) -> None:
        """Raise on every rank unless every rank can load, all the same form, shards all of one step."""
        if self._world_size == 1:
            if problem is not None:
                raise problem
            return
        no_step = -1  # in the exchanged row: a consolidated dict, or a shard that recorded no step
        rows = all_gather_ints([problem is not None, is_shard, no_step if step is None else step], self._process_group)
        failed = [rank for rank, row in enumerate(rows) if row[0]]
        if problem is not None:
            raise problem
        if failed:
            raise ValueError(
                f"load_state_dict: ranks {failed} cannot load their state dict (their errors say why); "
                "nothing was loaded on any rank"
            )
        shards = [rank for rank, row in enumerate(rows) if row[1]]
        if shards and len(shards) != self._world_size:
            raise ValueError(
                f"load_state_dict: ranks {shards} load a sharded state dict, the others a consolidated one; "
                "load the same form on every rank. Nothing was loaded"
            )
        steps = {rank: row[2] for rank, row in enumerate(rows)}
        if shards and len(set(steps.values())) > 1:
            described = ", ".join(f"rank {rank}: {'?' if s == no_step else s}" for rank, s in steps.items())
            raise ValueError(
                f"load_state_dict: the ranks' shards were taken after different numbers of steps ({described}), "
                "e.g. by a save interrupted part-way; load shards saved together (zero1.save_checkpoint "
                "commits them at once) or a consolidated state dict. Nothing was loaded"
            )

    # ------------------------------------------------------------------ helpers

    def _all_params(self) -> Iterable[torch.Tensor]:
        return chain.from_iterable(g["params"] for g in self.param_groups)

    def _check_same_group_on_every_rank(self, group: dict[str, Any]) -> None:
        """One all-gather: every rank adds the same parameters, in the same order, after the same number.

        The partition and the broadcasts pair parameters by position: ranks that
        disagree would silently overwrite parameters with others' bytes. Each rank
        sends hashes of the group's layout (number, names when the group has them,
        shapes, dtypes, device types, ``requires_grad``, and the number of
        parameters before it) and of its parameters' value fingerprints (see
        :func:`_value_fingerprints`) in order and sorted. The same fingerprints in
        another order on some rank mean the same parameters passed in another order
        (e.g. built from a set); different fingerprints are allowed, as ranks may
        hold different values until the first broadcast.
        """
        if self._world_size == 1:
            return
        params, names = group["params"], group.get("param_names")
        layout = f"after {len(self._owners)} parameters: " + ", ".join(
            f"{'' if names is None else names[i] + ' '}{tuple(p.shape)} {p.dtype} {p.device.type}"
            f"{'' if p.requires_grad else ' frozen'}"
            for i, p in enumerate(params)
        )
        values = _value_fingerprints(params)
        rows = all_gather_ints([_digest(layout), *_order_digests(values)], self._process_group)
        index = len(self.param_groups) - 1
        layouts = [row[0] for row in rows]
        if len(set(layouts)) > 1:
            raise ValueError(
                f"parameter group {index} differs across ranks (its parameters' number, names, shapes, dtypes, "
                f"device types or requires_grad, or the number of parameters before it); ranks that agree: "
                f"{_agreeing(layouts)}. Every rank must pass the same parameters in the same order. This rank "
                f"({self._rank}) has, {layout}"
            )
        agreeing = _reordered(rows, 1)
        if agreeing is not None:
            raise ValueError(
                f"parameter group {index} holds the same parameters on every rank but in another order; ranks "
                f"that agree on the order: {agreeing}. The owners' broadcasts would write one "
                f"parameter's values into another. Pass them in an order that is the same on every rank "
                f"(model.parameters() or model.named_parameters(), not a set or a dict built per rank)"
            )

    def _check_gradient_order(self) -> None:
        """Once, at the first :meth:`step`: the gradients come in the same order on every rank.

        Parameters without names that hold equal values (freshly initialized
        LayerNorm weights, say) cannot be told apart when a group is added. Their
        gradients can: a data-parallel wrapper has made each parameter's gradient
        equal on every rank, and different parameters get different gradients.
        The same gradient fingerprints in another order on some rank mean reordered
        parameters; one all-gather, before anything is updated. Gradients that
        differ between ranks (no averaging yet) tell nothing and pass.
        """
        self._gradient_order_checked = True
        if self._world_size == 1:
            return
        digests = []  # two per group, all groups in one all-gather
        for group in self.param_groups:
            grads = [p.grad if p.grad is not None else p.new_empty(0) for p in group["params"]]
            digests += _order_digests(_value_fingerprints(grads))
        rows = all_gather_ints(digests, self._process_group)
        for index in range(len(self.param_groups)):
            agreeing = _reordered(rows, 2 * index)
            if agreeing is not None:
                raise ValueError(
                    f"step(): the gradients of parameter group {index} are the same on every rank but come in "
                    f"another order on some: the parameters were passed in another order (ranks that agree: "
                    f"{agreeing}), and the owners' broadcasts would write one parameter's values into "
                    f"another. Nothing was updated. Pass the parameters in an order that is the same on every rank "
                    f"(model.named_parameters(), or model.parameters(), not a set or a dict built per rank)"
                )

    def _refuse_if_torn(self, what: str) -> None:
        """Raise if a :meth:`step` raised on this rank: its parameters may mix two steps."""
        if self._torn is not None:
            raise RuntimeError(
                f"{what}: {self._torn}; no checkpoint can be taken from this state, and no further step. "
                "Restart from the last checkpoint: load the model and this optimizer from it "
                "(zero1.load_checkpoint), which also clears this"
            )

    def _adopt_options(self, index: int) -> None:
        """Give global group ``index`` the options the wrapped optimizer filled in, and check them."""
        group = self.param_groups[index]
        for key, value in self._local.param_groups[index].items():
            if key not in _PARAM_KEYS:
                group.setdefault(key, value)
        if group.get("foreach", False) is None and not group.get("fused", False):
            kinds = {(p.device.type, type(p) in (torch.Tensor, nn.Parameter)) for p in group["params"]}
            if len(kinds) > 1:
                raise ValueError(
                    f"parameter group {index} mixes device types or tensor subclasses "
                    f"({sorted({p.device.type for p in group['params']})}) with "
                    f"foreach=None: the sharded and unsharded optimizer could pick different "
                    f"implementations; pass foreach=True or foreach=False explicitly"
                )

    def _build_broadcaster(self) -> ParameterBroadcaster:
        return ParameterBroadcaster(
            list(self._all_params()),
            self._owners,
            self._rank,
            self._process_group,
            self._broadcast_mode,
            self._bucket_bytes,
        )


def _agreeing(values: list[int]) -> list[list[int]]:
    """The ranks grouped by equal ``values[rank]``, each group sorted, groups by lowest rank."""
    groups: dict[int, list[int]] = {}
    for rank, value in enumerate(values):
        groups.setdefault(value, []).append(rank)
    return sorted(groups.values())


def _to_cpu(value: Any) -> Any:
    """A copy of ``value`` with every tensor moved to CPU memory (dicts, lists and tuples walked)."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(v) for v in value)
    return value
