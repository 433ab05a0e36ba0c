"""The contract every data-parallel wrapper in this package shares.

A wrapper keeps one full copy of the model on each rank; each rank runs forward
and backward on its own slice of the batch; ``finish_gradient_synchronization()``
then replaces every trainable parameter's gradient by its average over the ranks,
so that ``optimizer.step()`` takes the same step everywhere. The wrappers differ
only in *how* and *when* they all-reduce (see :mod:`ddp.naive`, :mod:`ddp.flat`,
:mod:`ddp.overlap`, :mod:`ddp.bucketed`); everything else lives here:

- construction checks that every rank can wrap its module and wraps the same
  architecture with the same settings (a problem on one rank is reported on
  every rank), then broadcasts all parameters (frozen ones too) and buffers
  from rank 0;
- ``.module``, ``forward``, ``parameters()`` and ``named_parameters()`` are the
  wrapped module's;
- a post-accumulate-grad hook on every trainable parameter tells the wrapper that
  the parameter's gradient for this backward pass is complete, and a tensor hook
  before accumulation lets a wrapper refuse a gradient it is already sending;
- ``no_sync()`` for gradient accumulation; bf16 gradient compression;
- ``abandon_gradient_synchronization()``, the way out of a step whose backward
  pass raised, and the bookkeeping that notices such a step.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import hashlib
import itertools
import weakref
from collections.abc import Iterator, Mapping

import torch
import torch.distributed as dist
from torch import nn

from ddp.errors import GradientSyncError

__all__ = ["DataParallel"]

# Gradients of these dtypes travel as bfloat16 when compression is on; narrower
# dtypes (bf16 itself, fp16) are sent as they are.
_COMPRESSIBLE_DTYPES = (torch.float32, torch.float64)

# The structure check prints at most this many lines of this rank's parameter list.
_MAX_SIGNATURE_LINES = 20

# Why a rank cannot wrap its module. Ranks exchange these codes at
# construction, so that every rank reports the problem instead of the others
# waiting for a peer that gave up.
_CAN_WRAP, _ALREADY_WRAPPED, _NOTHING_TRAINABLE, _SPARSE_GRADIENTS = 0, 1, 2, 3
_CANNOT_WRAP = {
    _ALREADY_WRAPPED: "the module is already wrapped (its gradient hooks are registered); wrap each module once",
    _NOTHING_TRAINABLE: "the module has no parameter with requires_grad=True; nothing to synchronize",
    _SPARSE_GRADIENTS: (
        "the module produces sparse gradients (nn.Embedding or nn.EmbeddingBag with sparse=True), which the "
        "ddp wrappers do not all-reduce; construct those layers with sparse=False (dense gradients)"
    ),
}

# What torch.autograd reports as the current graph task outside any backward pass.
_NO_BACKWARD = -1


def _digest(text: str) -> int:
    """A 64-bit hash of ``text`` as a signed integer (it travels in an int64 tensor)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little", signed=True)


def _sparse_layers(module: nn.Module) -> list[str]:
    """Names of the submodules of ``module`` whose weight gets a sparse gradient (``sparse=True`` embeddings)."""
    return [
        name or type(module).__name__
        for name, sub in module.named_modules()
        if isinstance(sub, (nn.Embedding, nn.EmbeddingBag)) and sub.sparse and sub.weight.requires_grad
    ]


def _backward_completed(wrapper: weakref.ref[DataParallel], task: int) -> None:
    """Autograd callback at the end of a backward pass; autograd runs it only if the pass did not raise."""
    live = wrapper()
    if live is not None and live._backward_task == task:
        live._backward_task = None


def _grad_hook(wrapper: weakref.ref[DataParallel], index: int, param: torch.Tensor) -> None:
    """Post-accumulate-grad hook: forwards to the wrapper while it is alive."""
    live = wrapper()
    if live is not None:
        live._grad_hook(index)


def _accumulate_hook(wrapper: weakref.ref[DataParallel], index: int, grad: torch.Tensor) -> None:
    """Tensor hook on a parameter: runs before backward adds ``grad`` into its ``.grad``.

    Returns ``None``, so the gradient passes unchanged; an exception raised here
    stops backward before anything is added.
    """
    live = wrapper()
    if live is not None:
        live._before_accumulate(index)


class DataParallel(nn.Module, abc.ABC):
    """Base class of the data-parallel wrappers; use a subclass.

    Arguments:
        module: the model, already on this rank's device (``cuda:<local rank>``
            for NCCL, CPU for gloo). Wrap a module once; move it before wrapping.
        process_group: the group whose ranks share the batch; ``None`` means the
            default group, which must be initialized.
        compress_bf16: if ``True``, float32/float64 gradients are all-reduced as
            bfloat16 (half the bytes of float32 on the wire) and converted back,
            so ``.grad`` keeps its dtype. The sum is then only as precise as
            bfloat16 (8 significant bits). Default ``False``.
        settings: for subclasses: their own constructor settings (name -> value,
            compared by ``repr``), which must be the same on every rank.

    Raises:
        TypeError: ``module`` is not an ``nn.Module`` or ``compress_bf16`` not a bool.
        RuntimeError: ``torch.distributed`` has no initialized default group.
        ValueError: on every rank, when on some rank the module has no trainable
            parameter or is already wrapped, or when the parameters/buffers
            (names, shapes, dtypes, requires_grad) or the wrapper and its
            settings differ between ranks.
    """

    def __init__(
        self,
        module: nn.Module,
        *,
        process_group: dist.ProcessGroup | None = None,
        compress_bf16: bool = False,
        settings: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        if not isinstance(module, nn.Module):
            raise TypeError(f"{name}: module must be a torch.nn.Module, got {type(module).__name__}")
        if not isinstance(compress_bf16, bool):
            raise TypeError(f"{name}: compress_bf16 must be True or False, got {compress_bf16!r}")
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError(
                f"{name} needs an initialized process group: call "
                "torch.distributed.init_process_group(...) first, or start the ranks with "
                "torchrun or ddp.launch.spawn"
            )
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        sparse_layers = _sparse_layers(module)
        if getattr(module, "_ddp_wrapped", False):
            cannot_wrap = _ALREADY_WRAPPED
        elif not named:
            cannot_wrap = _NOTHING_TRAINABLE
        elif sparse_layers:
            cannot_wrap = _SPARSE_GRADIENTS
        else:
            cannot_wrap = _CAN_WRAP

        self.module = module
        self.process_group = process_group if process_group is not None else dist.group.WORLD
        self.world_size = dist.get_world_size(self.process_group)
        # Averaging. NCCL averages inside the collective (ReduceOp.AVG -> ncclAvg, NCCL >=
        # 2.10; the 1/world_size scaling is fused into the reduction kernel), so no pass over
        # the gradients is spent on it; gloo has no AVG reduction, so there we sum, then
        # divide after the wait (_finish_average). PyTorch DDP instead divides each gradient
        # by the world size when it becomes ready, while copying it into its bucket
        # (at::mul_out(bucket_view, grad, 1/div_factor_)) or in place (bucket_view.div_)
        # when .grad already is the bucket view, then all-reduces with SUM
        # (torch/csrc/distributed/c10d/reducer.cpp, Reducer::mark_variable_ready_dense):
        # one extra pass over every gradient during backward, which AVG avoids.
        self._collective_averages = dist.get_backend(self.process_group) == dist.Backend.NCCL
        self._reduce_op = dist.ReduceOp.AVG if self._collective_averages else dist.ReduceOp.SUM
        self.rank = dist.get_rank(self.process_group)
        self.compress_bf16 = compress_bf16
        # Unique trainable tensors in registration order: named_parameters() yields a
        # tied (shared) weight once, under its first name.
        self._param_names = [n for n, _ in named]
        self._params = [p for _, p in named]
        self._settings = {"wrapper": name, "compress_bf16": compress_bf16, **(settings or {})}

        self._agree_across_ranks(cannot_wrap, sparse_layers)
        self._broadcast_from_rank0()

        self._sync_enabled = True
        self._backward_seen = False
        # The autograd graph task of the backward pass that produced this step's latest
        # gradients, from its first gradient until autograd's end-of-pass callback clears it.
        # Still set once no backward runs means that pass raised (see forward and
        # _gradient_already_complete).
        self._backward_task: int | None = None
        # The hooks live in C++ autograd state, where Python's garbage collector cannot see
        # them: a hook holding the wrapper strongly would make param -> hook -> wrapper ->
        # module -> param a cycle that is never freed (the whole model and its gradients
        # leak once the wrapper is dropped). So they hold it weakly.
        wrapper = weakref.ref(self)
        # The pre-accumulation hook costs a Python call per parameter per backward: only
        # wrappers that override _before_accumulate get it.
        guards_accumulation = type(self)._before_accumulate is not DataParallel._before_accumulate
        for index, param in enumerate(self._params):
            if guards_accumulation:
                param.register_hook(functools.partial(_accumulate_hook, wrapper, index))
            param.register_post_accumulate_grad_hook(functools.partial(_grad_hook, wrapper, index))
        module._ddp_wrapped = True

    # -- the module's face -------------------------------------------------------

    def forward(self, *args, **kwargs):
        """Runs the wrapped module: ``self.module(*args, **kwargs)``.

        Raises:
            GradientSyncError: an earlier backward pass on this rank raised and
                its step was not abandoned (see :meth:`abandon_gradient_synchronization`).
        """
        if self._backward_task is not None and torch._C._current_graph_task_id() == _NO_BACKWARD:
            raise GradientSyncError(self._failed_backward_message())
        return self.module(*args, **kwargs)

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """The wrapped module's ``named_parameters`` (no ``module.`` prefix); ``parameters()`` follows."""
        return self.module.named_parameters(prefix=prefix, recurse=recurse, remove_duplicate=remove_duplicate)

    # -- synchronization ---------------------------------------------------------

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward passes inside this context accumulate gradients locally, without communicating.

        The next ``finish_gradient_synchronization()`` (after a backward pass
        outside the context) averages everything accumulated since the last one.

        Example::

            for micro_batch in micro_batches[:-1]:
                with model.no_sync():
                    (loss_fn(model(micro_batch)) / k).backward()
            (loss_fn(model(micro_batches[-1])) / k).backward()
            model.finish_gradient_synchronization()
        """
        previous = self._sync_enabled
        self._sync_enabled = False
        try:
            yield
        finally:
            self._sync_enabled = previous

    def finish_gradient_synchronization(self) -> None:
        """Average every trainable parameter's gradient over the ranks.

        On gloo, which has no AVG reduction, gradients are summed, then divided by
        the world size; on NCCL the all-reduce averages itself (``ReduceOp.AVG``).

        Call it after ``loss.backward()`` and before ``optimizer.step()``, on
        every rank. When it returns, each trainable parameter has a ``.grad``
        equal on all ranks. A parameter that got no gradient on some rank
        contributes zeros from that rank; if no rank produced a gradient for it,
        its ``.grad`` is all zeros (not ``None``).

        Raises:
            GradientSyncError: called inside ``no_sync()``; no backward pass
                produced a gradient on this rank since the last synchronization;
                or an all-reduce failed or timed out (the message names the
                gradients still pending).
        """
        if not self._sync_enabled:
            raise GradientSyncError(
                "finish_gradient_synchronization() was called inside no_sync(); call it after the "
                "last backward pass, outside the context"
            )
        if not self._backward_seen:
            raise GradientSyncError(
                "finish_gradient_synchronization() was called, but no backward pass produced a "
                "gradient for any trainable parameter on this rank since the last synchronization; "
                "call loss.backward() first"
            )
        self._backward_seen = False
        self._synchronize()

    def abandon_gradient_synchronization(self) -> None:
        """Give up this step: discard its gradients, so that the next step starts clean.

        Call it on every rank, outside backward, when a step cannot be finished,
        typically after catching an exception raised by ``loss.backward()`` (or
        by a forward pass or loss in between) on every rank. It is a collective
        for :class:`ddp.OverlapDDP` and :class:`ddp.BucketedDDP`: some of their
        all-reduces started during the failed backward, how many depends on how
        far it got on each rank, so every rank now launches all the others of
        the step and waits for them (one step's worth of communication, results
        discarded), and the next step's all-reduces pair up again. A rank that
        finished the step instead would average partial gradients. Every
        trainable parameter's ``.grad`` is then set to ``None``, including what
        ``no_sync()`` passes accumulated since the last synchronization. Then run
        the next step as usual (``optimizer.zero_grad()``, forward, backward,
        ``finish_gradient_synchronization()``, ``optimizer.step()``); skip
        ``optimizer.step()`` for the abandoned step.

        Example::

            try:
                loss_fn(model(x), y).backward()
            except FloatingPointError:  # raised on every rank (see the README if on some only)
                model.abandon_gradient_synchronization()
                continue  # skip this batch
            model.finish_gradient_synchronization()
            optimizer.step()

        Raises:
            GradientSyncError: called inside a backward pass, or an all-reduce
                of the abandoned step failed (a peer died or did not call this).
        """
        if torch._C._current_graph_task_id() != _NO_BACKWARD:
            raise GradientSyncError(
                "abandon_gradient_synchronization() was called inside a backward pass; call it after "
                "catching the exception that backward raised"
            )
        try:
            self._abandon()
        finally:
            self._backward_task = None
            self._backward_seen = False
            for param in self._params:
                param.grad = None

    def _grad_hook(self, index: int) -> None:
        self._note_backward()
        grad = self._params[index].grad
        if grad is not None and grad.layout != torch.strided:
            raise GradientSyncError(
                f"{self._param_names[index]} got a {grad.layout} gradient; the ddp wrappers all-reduce dense "
                "gradients only (a sparse gradient comes from, e.g., an embedding with sparse=True): make it "
                "dense, then call model.abandon_gradient_synchronization() on every rank"
            )
        if not self._backward_seen:  # nn.Module's __setattr__ costs microseconds: once per pass
            self._backward_seen = True
        if self._sync_enabled:
            self._on_grad_ready(index)

    def _note_backward(self) -> None:
        """Remember the backward pass now running (from its first gradient) until autograd reports it complete."""
        if self._backward_task is None:
            task = torch._C._current_graph_task_id()
            self._backward_task = task
            wrapper = weakref.ref(self)
            torch.autograd.Variable._execution_engine.queue_callback(
                functools.partial(_backward_completed, wrapper, task)
            )

    def _failed_backward_message(self) -> str:
        return (
            "the last backward pass on this rank did not complete (it raised an exception), so this step's "
            "gradients are partial and, with OverlapDDP and BucketedDDP, some of their all-reduces started "
            "while others did not. Call model.abandon_gradient_synchronization() on every rank to discard "
            "the step, then start the next one"
        )

    def _gradient_already_complete(self, index: int) -> GradientSyncError:
        """The error for a gradient that backward is about to add into although it is complete for this step."""
        name = self._param_names[index]
        if self._backward_task not in (None, torch._C._current_graph_task_id()):
            return GradientSyncError(
                f"a backward pass reached {name}, whose gradient for this step is already complete; nothing "
                f"was added to it. {self._failed_backward_message()}"
            )
        return GradientSyncError(
            f"a second backward pass reached {name}, whose gradient for this step is already complete (and "
            "may be in an all-reduce); nothing was added to it. Run one backward pass per synchronized step "
            "(accumulate earlier micro-batches inside no_sync()), and call finish_gradient_synchronization() "
            "after each step's backward"
        )

    def _abandon(self) -> None:
        """Wrappers whose all-reduces start during backward issue and await all of the abandoned step's."""

    def _before_accumulate(self, index: int) -> None:
        """Called before backward adds into ``self._params[index].grad``; raise to stop it.

        Wrappers whose all-reduces start during backward override it to refuse a
        gradient that is already being communicated; the hook that calls it is
        registered only for those.
        """

    def _on_grad_ready(self, index: int) -> None:
        """Called when ``self._params[index].grad`` is complete for this backward pass (outside no_sync)."""

    @abc.abstractmethod
    def _synchronize(self) -> None:
        """All-reduce and average the gradients of ``self._params``; subclasses implement it."""

    # -- helpers for the subclasses ----------------------------------------------

    def _grad_or_zeros(self, index: int) -> torch.Tensor:
        """The parameter's ``.grad``, set to zeros first if backward produced none on this rank."""
        param = self._params[index]
        if param.grad is None:
            param.grad = torch.zeros_like(param)
        return param.grad

    def _wire_dtype(self, dtype: torch.dtype) -> torch.dtype:
        """The dtype in which gradients of ``dtype`` are all-reduced."""
        return torch.bfloat16 if self.compress_bf16 and dtype in _COMPRESSIBLE_DTYPES else dtype

    def _wire_tensor(self, grad: torch.Tensor) -> torch.Tensor:
        """``grad`` itself if it can be all-reduced in place, else a contiguous copy in the wire dtype."""
        wire_dtype = self._wire_dtype(grad.dtype)
        if wire_dtype == grad.dtype and grad.is_contiguous():
            return grad
        return grad.to(dtype=wire_dtype, memory_format=torch.contiguous_format)

    def _all_reduce(self, tensor: torch.Tensor, async_op: bool = False):
        """All-reduce ``tensor`` in place: its average on NCCL, its sum elsewhere (see :meth:`_finish_average`)."""
        return dist.all_reduce(tensor, op=self._reduce_op, group=self.process_group, async_op=async_op)

    def _finish_average(self, tensor: torch.Tensor) -> torch.Tensor:
        """Turn an all-reduced ``tensor`` into the average: divide by the world size unless the collective did."""
        return tensor if self._collective_averages else tensor.div_(self.world_size)

    def _average_into(self, grad: torch.Tensor, reduced: torch.Tensor) -> None:
        """``grad <- average``, where ``reduced`` is ``grad`` itself or its wire copy, all-reduced."""
        if reduced is not grad:
            grad.copy_(reduced)
        self._finish_average(grad)

    # -- construction ------------------------------------------------------------

    def _structure_signature(self) -> str:
        lines = [
            f"parameter {n} shape={tuple(p.shape)} dtype={p.dtype} device={p.device.type} "
            f"requires_grad={p.requires_grad}"
            for n, p in self.module.named_parameters()
        ]
        lines += [
            f"buffer {n} shape={tuple(b.shape)} dtype={b.dtype} device={b.device.type}"
            for n, b in self.module.named_buffers()
        ]
        return "\n".join(lines)

    def _settings_signature(self) -> str:
        return ", ".join(f"{key}={value!r}" for key, value in self._settings.items())

    def _exchange_device(self) -> torch.device:
        """Where the wrapper's own small collectives put their tensors.

        Not simply the first parameter's device, which on a misconfigured rank may
        be one the backend cannot use (the construction check must report that,
        not crash on it): CPU for gloo; for NCCL, which moves only GPU tensors,
        the module's first CUDA device, else the current CUDA device.
        """
        if dist.get_backend(self.process_group) != dist.Backend.NCCL:
            return torch.device("cpu")
        tensors = itertools.chain(self.module.parameters(), self.module.buffers())
        first_cuda = next((t.device for t in tensors if t.device.type == "cuda"), None)
        return first_cuda if first_cuda is not None else torch.device("cuda", torch.cuda.current_device())

    def _agree_across_ranks(self, cannot_wrap: int, sparse_layers: list[str]) -> None:
        """One all-gather, before any broadcast could hang: every rank can wrap, and wraps the same.

        Each rank contributes its :data:`_CANNOT_WRAP` code, a hash of its
        parameter/buffer list (name, shape, dtype, device type and
        ``requires_grad`` of each, in order) and a hash of the wrapper's
        settings. Any difference raises ``ValueError`` on every rank.
        """
        name = type(self).__name__
        structure, settings = self._structure_signature(), self._settings_signature()
        mine = torch.tensor(
            [cannot_wrap, _digest(structure), _digest(settings)], dtype=torch.int64, device=self._exchange_device()
        )
        everyone = [torch.empty_like(mine) for _ in range(self.world_size)]
        dist.all_gather(everyone, mine, group=self.process_group)
        rows = [t.tolist() for t in everyone]
        failing = [(rank, row[0]) for rank, row in enumerate(rows) if row[0] != _CAN_WRAP]
        if failing:
            reasons = "; ".join(f"rank {rank}: {_CANNOT_WRAP[code]}" for rank, code in failing)
            here = f". On this rank: {', '.join(sparse_layers)}" if cannot_wrap == _SPARSE_GRADIENTS else ""
            raise ValueError(f"{name}: cannot wrap the module on every rank ({reasons}){here}")
        checks = (
            (1, "module parameters or buffers (names, shapes, dtypes, device types, requires_grad)", structure),
            (2, "wrapper class or settings", settings),
        )
        for column, what, signature in checks:
            groups: dict[int, list[int]] = {}
            for rank, row in enumerate(rows):
                groups.setdefault(row[column], []).append(rank)
            if len(groups) == 1:
                continue
            lines = signature.splitlines()
            shown = "\n".join(lines[:_MAX_SIGNATURE_LINES])
            hidden = len(lines) - _MAX_SIGNATURE_LINES
            more = f"\n... ({hidden} more lines)" if hidden > 0 else ""
            raise ValueError(
                f"{name}: {what} differ across ranks; ranks that agree: {sorted(groups.values())}. "
                f"This rank ({self.rank}) has:\n{shown}{more}"
            )

    @torch.no_grad()
    def _broadcast_from_rank0(self) -> None:
        tensors = list(self.module.parameters()) + list(self.module.buffers())
        for tensor in tensors:
            data = tensor.detach()
            staging = data if data.is_contiguous() else data.contiguous()
            dist.broadcast(staging, group_src=0, group=self.process_group)
            if staging is not data:
                data.copy_(staging)

    def extra_repr(self) -> str:
        return f"world_size={self.world_size}, compress_bf16={self.compress_bf16}"
