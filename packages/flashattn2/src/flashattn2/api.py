"""``flash_attention``: the functional entry point.

It validates its arguments, picks a backend, and runs the attention one of two
ways, with the same kernels:

- inside ``torch.compile``: two ``torch.library`` custom operators
  (``flashattn2::attention_forward`` and ``flashattn2::attention_backward``)
  joined by ``register_autograd``. Being custom operators with fake (shape-only)
  implementations, they are single opaque nodes to the compiler, so a compiled
  model that calls ``flash_attention`` compiles with ``fullgraph=True`` (no
  graph breaks);
- in eager mode: the plain autograd Function :class:`~flashattn2.autograd.ScaledAttention`.
  Custom-operator dispatch costs host time on every call (measured on the H100
  machine: 1.10 ms of host time per forward+backward at B=1, H=16, N=1024, D=64,
  against 0.34 ms for the kernels' own launches), which at short sequences is
  more than the kernels' GPU time.
"""

from __future__ import annotations

import torch

from flashattn2._inputs import (
    backward_any_layout,
    check_attention_inputs,
    check_triton_device,
    forward_any_layout,
    triton_runs_on_cpu,
)
from flashattn2.autograd import IMPLEMENTATIONS, ScaledAttention

BACKENDS = ("auto", "triton", "pytorch")


@torch.compiler.assume_constant_result
def _triton_on_cpu() -> bool:
    return triton_runs_on_cpu()


def resolve_backend(backend: str, device: torch.device) -> str:
    """``"triton"`` or ``"pytorch"``: the implementation that serves ``backend`` on ``device``.

    ``"auto"`` picks Triton for CUDA tensors, and for CPU tensors when Triton's
    interpreter is on: ``TRITON_INTERPRET=1`` when flashattn2 was imported (Triton
    builds the kernels for the interpreter or for a GPU then) and still now; the
    tiled PyTorch implementation otherwise. ``"triton"`` raises ``ValueError``
    where the kernels cannot run.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}")
    if backend == "auto":
        backend = "triton" if device.type == "cuda" or (device.type == "cpu" and _triton_on_cpu()) else "pytorch"
    if backend == "triton":
        check_triton_device(device)
    return backend


@torch.library.custom_op("flashattn2::attention_forward", mutates_args=())
def _attention_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, softmax_scale: float, backend: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """Validated inputs in either layout -> (O with q's shape, L float32 with q.shape[:-1])."""
    forward, _ = IMPLEMENTATIONS[backend]
    return forward_any_layout(forward, q, k, v, causal, softmax_scale)


@_attention_forward.register_fake
def _(q, k, v, causal, softmax_scale, backend):
    return q.new_empty(q.shape), q.new_empty(q.shape[:-1], dtype=torch.float32)


@torch.library.custom_op("flashattn2::attention_backward", mutates_args=())
def _attention_backward(
    grad_out: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    causal: bool,
    softmax_scale: float,
    backend: str,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """-> (dq, dk, dv) with the shapes of q, k, v."""
    _, backward = IMPLEMENTATIONS[backend]
    return backward_any_layout(backward, grad_out, q, k, v, out, lse, causal, softmax_scale)


@_attention_backward.register_fake
def _(grad_out, q, k, v, out, lse, causal, softmax_scale, backend):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup_context(ctx, inputs, output):
    q, k, v, causal, softmax_scale, backend = inputs
    out, lse = output
    ctx.mark_non_differentiable(lse)
    ctx.set_materialize_grads(False)  # L gets no gradient: do not allocate a zero tensor for it
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.causal, ctx.softmax_scale, ctx.backend = causal, softmax_scale, backend


def _backward(ctx, grad_out, _grad_lse):
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = _attention_backward(grad_out, q, k, v, out, lse, ctx.causal, ctx.softmax_scale, ctx.backend)
    return dq, dk, dv, None, None, None


_attention_forward.register_autograd(_backward, setup_context=_setup_context)


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    softmax_scale: float | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """Scaled dot-product attention, ``softmax(scale * q k^T [+ causal mask]) v``, computed by FlashAttention-2.

    Arguments:
        q: ``(B, Nq, D)`` or ``(B, H, Nq, D)``.
        k, v: ``(B, Nk, D)`` or ``(B, Hkv, Nk, D)``, same rank as q. With 4-D
            inputs ``Hkv`` may be smaller than ``H`` if it divides it
            (grouped-query / multi-query attention): query head ``h`` uses k/v
            head ``h // (H // Hkv)``.
            All three: the same dtype (float16, bfloat16 or float32) and device;
            head dim ``1 <= D <= 256``; any ``Nq, Nk >= 0``; any strides (views
            of a packed QKV tensor, transposes) without copies.
        causal: mask future keys, aligned to the bottom-right corner: query ``i``
            sees key ``j`` iff ``j <= i + Nk - Nq`` (the usual mask when
            ``Nq == Nk``; with a KV cache the last query sees every key). A query
            that sees no key (``Nq > Nk``, its first ``Nq - Nk`` rows) gets 0.
        softmax_scale: multiplies ``q . k``; default ``1 / sqrt(D)``.
        backend: ``"auto"`` (Triton on CUDA; on CPU, Triton when
            ``TRITON_INTERPRET=1`` was set before flashattn2 was imported and
            still is, else the tiled PyTorch implementation), ``"triton"`` or
            ``"pytorch"``.

    Returns:
        O with q's shape, dtype and device (contiguous). Differentiable in q, k, v.

    Raises:
        TypeError: non-tensor, sparse or nested inputs, unsupported or mixed
            dtypes, non-real scale.
        ValueError: ranks or shapes that do not match, D outside 1..256, k/v heads
            that do not divide q heads, different devices, an unknown backend, or
            a device the Triton kernels cannot serve.

    Example::

        >>> import torch
        >>> from flashattn2 import flash_attention
        >>> q = torch.randn(2, 8, 128, 64)          # (B, H, N, D)
        >>> k = v = torch.randn(2, 2, 128, 64)      # 2 k/v heads shared by 8 query heads
        >>> flash_attention(q, k, v, causal=True).shape
        torch.Size([2, 8, 128, 64])
    """
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool; got {type(causal).__name__}")
    scale = check_attention_inputs(q, k, v, softmax_scale)
    resolved = resolve_backend(backend, q.device)
    if torch.compiler.is_compiling():
        out, _ = _attention_forward(q, k, v, causal, scale, resolved)
        return out
    return ScaledAttention.apply(q, k, v, causal, scale, resolved)
