"""BucketedDDP: gradients grouped into buckets whose all-reduces overlap with backward."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ddp.base import DataParallel
from ddp.errors import GradientSyncError
from ddp.ordering import InOrderLauncher

__all__ = ["DEFAULT_FIRST_BUCKET_MB", "BucketedDDP", "assign_buckets"]

# bucket_size_mb counts mebibytes, as torch.nn.parallel.DistributedDataParallel's
# bucket_cap_mb does (its default, 25, is ours too).
_BYTES_PER_MB = 2**20

# PyTorch DDP's first bucket is capped at torch.distributed._DEFAULT_FIRST_BUCKET_BYTES
# (1 MiB; torch/nn/parallel/distributed.py, _BucketCapacityConfig), so that the
# gradients produced first start their all-reduce without waiting to fill 25 MiB.
# Spelled out rather than read from torch's private name; test_buckets checks they agree.
DEFAULT_FIRST_BUCKET_MB = 1.0


def assign_buckets(
    params: Sequence[torch.Tensor],
    bucket_size_mb: float | None,
    first_bucket_mb: float | None = None,
    order: Sequence[int] | None = None,
) -> list[list[int]]:
    """Group parameter indices into buckets, in the order gradients are expected to become ready.

    Walking ``order`` (by default the reverse of ``params``: backward produces
    the gradients of the last layers first), a parameter joins the current
    bucket if it has the same dtype and device and the bucket has not yet
    reached its cap; otherwise it starts a new bucket. So a bucket is closed by
    the parameter that brings it to its cap or past it, as PyTorch DDP closes
    its buckets (torch/csrc/distributed/c10d/reducer.cpp,
    ``compute_bucket_assignment_by_size``), and it exceeds the cap by less than
    that last parameter. The cap is ``first_bucket_mb`` MiB for bucket 0 (but
    never more than ``bucket_size_mb``) and ``bucket_size_mb`` MiB for the
    others. ``bucket_size_mb=None`` puts every parameter of one (dtype, device)
    run into a single bucket, whatever ``first_bucket_mb``.

    Closing a bucket only once it is full keeps a small parameter (a norm's
    weight, say) that comes between two parameters larger than the cap from
    making a bucket, and an all-reduce, of its own.

    Arguments:
        params: the tensors, in registration order.
        bucket_size_mb: the cap in MiB (2**20 bytes), > 0, or ``None`` for no cap.
        first_bucket_mb: bucket 0's cap in MiB, > 0, or ``None`` for the same
            cap as the others (the default).
        order: every index of ``params`` once, the expected readiness order;
            ``None`` for ``len(params) - 1, ..., 1, 0``.

    Returns:
        ``buckets[k]`` = indices into ``params`` of bucket ``k``'s members, in
        ``order``; bucket 0 holds ``order[0]``.
    """
    order = list(reversed(range(len(params)))) if order is None else list(order)
    if sorted(order) != list(range(len(params))):
        raise ValueError(f"order must list every parameter index 0..{len(params) - 1} once, got {order}")
    cap_bytes = math.inf if bucket_size_mb is None else bucket_size_mb * _BYTES_PER_MB
    first_cap_bytes = cap_bytes
    if first_bucket_mb is not None and bucket_size_mb is not None:
        first_cap_bytes = min(cap_bytes, first_bucket_mb * _BYTES_PER_MB)
    buckets: list[list[int]] = []
    bucket_bytes = 0
    bucket_kind = None
    for index in order:
        param = params[index]
        size = param.numel() * param.element_size()
        kind = (param.dtype, param.device)
        cap = first_cap_bytes if len(buckets) == 1 else cap_bytes
        if buckets and kind == bucket_kind and bucket_bytes < cap:
            buckets[-1].append(index)
            bucket_bytes += size
        else:
            buckets.append([index])
            bucket_bytes = size
            bucket_kind = kind
    return buckets


def _check_mib(name: str, value: float | None, none_means: str) -> None:
    """Raise unless ``value`` is ``None`` or a positive finite number (of MiB)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"BucketedDDP: {name} must be a number of MiB or None, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"BucketedDDP: {name} must be > 0 and finite (or None for {none_means}), got {value!r}")


@dataclass
class _Bucket:
    members: list[int]  # parameter indices
    buffer: torch.Tensor  # flat, the members' dtype; the members' .grad are views into it
    views: list[torch.Tensor]  # views[j] is members[j]'s gradient inside buffer
    wire: torch.Tensor | None  # a bfloat16 twin of buffer when compressing, else None


class BucketedDDP(DataParallel):
    """Overlapped all-reduce of gradient buckets, with gradients living in the buckets.

    Trainable parameters are grouped, in reverse registration order (until the
    rebuild described below), into buckets of one dtype and device each, each
    closed once it holds ``bucket_size_mb`` MiB or more, as PyTorch DDP closes
    its buckets (see :func:`assign_buckets`). Each bucket
    owns one flat buffer, and each
    parameter's ``.grad`` becomes a view into it, so a bucket is all-reduced
    in place without flattening or copying back. When backward has finished every
    gradient of a bucket (post-accumulate-grad hooks), the bucket's asynchronous
    all-reduce starts, while backward continues on earlier layers. Buckets are
    launched strictly in index order on every rank (see :mod:`ddp.ordering`).
    ``finish_gradient_synchronization()`` launches buckets still waiting (a
    parameter without a gradient on this rank contributes zeros), waits, and
    averages (see :meth:`finish_gradient_synchronization`).

    Few large buckets pay little message latency but start late (the first
    bucket waits for its last gradient); many small ones start early but pay
    latency per message. The 25 MiB default is PyTorch DDP's, and so is the
    smaller cap of the first bucket (``first_bucket_mb``, 1 MiB), which lets
    communication start as soon as the first gradients are ready.

    Registration order only approximates the order in which backward produces
    gradients (a layer may be defined after the one it feeds, a projection
    before the one computed first), and a bucket whose gradients come late holds
    back every bucket after it. So, as PyTorch DDP does
    (torch/csrc/distributed/c10d/reducer.cpp, ``Reducer::rebuild_buckets`` and
    ``sync_bucket_indices``), the buckets are rebuilt once, at the end of the
    first synchronized step's ``finish_gradient_synchronization()``: the same
    caps, walked in the order in which rank 0's gradients became ready in that
    step (broadcast from rank 0, so every rank gets the same buckets; parameters
    that had no gradient on rank 0 go last, in their previous order). That
    step's averaged gradients are moved into the new buckets and ``.grad``
    points at the new views, so ``optimizer.step()`` sees them unchanged. While
    it runs, a few buckets' worth of gradient memory is held twice (each old
    buffer is freed once its last gradient moved). ``rebuild_buckets=False``
    keeps the first layout (for models whose first step is not representative).

    When ``.grad`` is not the bucket view (the first step, or after
    ``optimizer.zero_grad()`` with its default ``set_to_none=True``, backward
    allocates a fresh gradient), it is copied into the bucket once and ``.grad``
    is pointed at the view. ``optimizer.zero_grad(set_to_none=False)`` keeps the
    views and avoids that copy. As in :class:`ddp.OverlapDDP`, run exactly one
    backward pass per synchronized step (earlier micro-batches inside
    ``no_sync()``), and after a backward pass that raised call
    ``abandon_gradient_synchronization()`` on every rank.

    Arguments:
        module: the model, on this rank's device (see :class:`ddp.DataParallel`).
            Do not move it after wrapping: the buckets stay where they were made.
        bucket_size_mb: bucket cap in MiB (2**20 bytes), a positive number, or
            ``None`` for no cap: one bucket per run of consecutive parameters
            (in launch order) of one dtype and device. A bucket is closed by the
            parameter that brings it to the cap, so it exceeds the cap by less
            than that parameter. Default 25.0.
        first_bucket_mb: the cap of bucket 0 (the first to be all-reduced) in
            MiB, a positive number, or ``None`` for ``bucket_size_mb``. It never
            exceeds ``bucket_size_mb`` and is ignored when that is ``None``.
            Default :data:`DEFAULT_FIRST_BUCKET_MB` (1.0), PyTorch DDP's
            ``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``. (PyTorch DDP
            applies it only when its ``bucket_cap_mb`` is left at the default;
            pass ``first_bucket_mb=None`` for that behaviour with an explicit
            ``bucket_size_mb``.)
        rebuild_buckets: rebuild the buckets in rank 0's readiness order after
            the first synchronized step (default ``True``; see above).
        process_group: the group to average over; ``None`` is the default group.
        compress_bf16: all-reduce float32/float64 buckets as bfloat16 through a
            bfloat16 twin buffer (default ``False``).

    Raises:
        TypeError / ValueError: ``bucket_size_mb`` or ``first_bucket_mb`` is not
            ``None`` or a positive finite number, or ``rebuild_buckets`` not a
            bool; plus those of :class:`ddp.DataParallel`.

    Example::

        import torch
        from ddp import BucketedDDP

        # in each rank, after torch.distributed.init_process_group("gloo")
        net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        model = BucketedDDP(net, bucket_size_mb=25.0)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for step in range(3):
            optimizer.zero_grad(set_to_none=False)  # keeps .grad as bucket views
            model(torch.randn(4, 8)).square().mean().backward()
            model.finish_gradient_synchronization()
            optimizer.step()
    """

    def __init__(
        self,
        module,
        bucket_size_mb: float | None = 25.0,
        *,
        first_bucket_mb: float | None = DEFAULT_FIRST_BUCKET_MB,
        rebuild_buckets: bool = True,
        process_group=None,
        compress_bf16=False,
    ) -> None:
        _check_mib("bucket_size_mb", bucket_size_mb, "one bucket")
        _check_mib("first_bucket_mb", first_bucket_mb, "the same cap as the others")
        if not isinstance(rebuild_buckets, bool):
            raise TypeError(f"BucketedDDP: rebuild_buckets must be True or False, got {rebuild_buckets!r}")
        settings = {
            # as floats, so that 25 on one rank and 25.0 on another count as the same
            "bucket_size_mb": None if bucket_size_mb is None else float(bucket_size_mb),
            "first_bucket_mb": None if first_bucket_mb is None else float(first_bucket_mb),
            "rebuild_buckets": rebuild_buckets,
        }
        super().__init__(module, process_group=process_group, compress_bf16=compress_bf16, settings=settings)
        self.bucket_size_mb = bucket_size_mb
        self.first_bucket_mb = first_bucket_mb
        self._set_buckets(assign_buckets(self._params, bucket_size_mb, first_bucket_mb))
        # Parameter indices in the order their gradients became ready in this step, kept
        # until the buckets are rebuilt (after the first synchronized step); None after that.
        self._ready_order: list[int] | None = [] if rebuild_buckets else None

    @property
    def bucket_members(self) -> list[list[str]]:
        """The parameter names of each bucket, in launch order."""
        return [[self._param_names[i] for i in bucket.members] for bucket in self._buckets]

    def _make_bucket(self, members: list[int]) -> _Bucket:
        params = [self._params[i] for i in members]
        buffer = torch.zeros(sum(p.numel() for p in params), dtype=params[0].dtype, device=params[0].device)
        views, offset = [], 0
        for param in params:
            views.append(buffer[offset : offset + param.numel()].view_as(param))
            offset += param.numel()
        wire_dtype = self._wire_dtype(buffer.dtype)
        wire = None if wire_dtype == buffer.dtype else torch.empty_like(buffer, dtype=wire_dtype)
        return _Bucket(members, buffer, views, wire)

    @torch.no_grad()
    def _set_buckets(self, assignment: list[list[int]]) -> None:
        """Make the buckets of ``assignment`` (see :func:`assign_buckets`) and a launcher for them.

        Existing gradients are copied into their new bucket and ``.grad`` points
        at the view. The old buckets are dropped first, so that each old buffer
        is freed as soon as its last gradient has moved.
        """
        self._buckets: list[_Bucket] = []
        for members in assignment:
            bucket = self._make_bucket(members)
            for index, view in zip(members, bucket.views):
                param = self._params[index]
                if param.grad is not None:
                    view.copy_(param.grad)
                    param.grad = view
            self._buckets.append(bucket)
        units = [bucket.members for bucket in self._buckets]
        # Uncompressed buckets all-reduced with ReduceOp.AVG (NCCL) are averaged in place by the
        # collective: nothing is left to do once one finished, so the launcher spends no Python call
        # per bucket on it after backward.
        averaged_in_place = self._collective_averages and all(bucket.wire is None for bucket in self._buckets)
        complete = None if averaged_in_place else self._complete
        self._launcher = InOrderLauncher(units, self._param_names, self._launch, complete)

    def _before_accumulate(self, index: int) -> None:
        if self._launcher.is_ready(index):
            raise self._gradient_already_complete(index)

    def _on_grad_ready(self, index: int) -> None:
        self._launcher.mark_ready(index)
        if self._ready_order is not None:
            self._ready_order.append(index)

    def _synchronize(self) -> None:
        try:
            self._launcher.finish()
        except BaseException:
            if self._ready_order is not None:
                self._ready_order.clear()  # observe the next, complete step instead
            raise
        if self._ready_order is not None:
            observed, self._ready_order = self._ready_order, None
            self._rebuild_buckets(observed)

    def _abandon(self) -> None:
        if self._ready_order is not None:
            self._ready_order.clear()  # observe the next, complete step instead
        self._launcher.abandon()

    def _rebuild_buckets(self, observed: list[int]) -> None:
        """Rebuild the buckets in the order ``observed`` on rank 0 (parameter indices, each at most once)."""
        seen = set(observed)
        launch_order = [index for bucket in self._buckets for index in bucket.members]
        order = observed + [index for index in launch_order if index not in seen]
        # NCCL broadcasts only device tensors: the parameters' device is this rank's.
        shared = torch.tensor(order, dtype=torch.int64, device=self._params[0].device)
        try:
            dist.broadcast(shared, group_src=0, group=self.process_group)
        except RuntimeError as error:
            raise GradientSyncError(
                f"BucketedDDP: broadcasting rank 0's gradient readiness order, to rebuild the buckets, "
                f"failed ({type(error).__name__}: {error}); this step's gradients were averaged"
            ) from error
        assignment = assign_buckets(self._params, self.bucket_size_mb, self.first_bucket_mb, order=shared.tolist())
        if assignment != [bucket.members for bucket in self._buckets]:
            self._set_buckets(assignment)

    @torch.no_grad()
    def _launch(self, unit: int) -> dist.Work:
        bucket = self._buckets[unit]
        for index, view in zip(bucket.members, bucket.views):
            param = self._params[index]
            if param.grad is view:
                continue
            if param.grad is None:
                view.zero_()  # no gradient on this rank: contribute zeros
            else:
                view.copy_(param.grad)
            param.grad = view
        send = bucket.buffer if bucket.wire is None else bucket.wire.copy_(bucket.buffer)
        return self._all_reduce(send, async_op=True)

    @torch.no_grad()
    def _complete(self, unit: int) -> None:
        bucket = self._buckets[unit]
        self._average_into(bucket.buffer, bucket.buffer if bucket.wire is None else bucket.wire)

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, bucket_size_mb={self.bucket_size_mb}, "
            f"first_bucket_mb={self.first_bucket_mb}, buckets={len(self._buckets)}"
        )
