"""The ``torch.autograd.Function`` classes: one algorithm, two implementations.

:class:`FlashAttention2Triton` and :class:`FlashAttention2PyTorch` take
``apply(q, k, v, is_causal)`` and return O; both save exactly q, k, v, O and the
logsumexp L (float32, shape ``q.shape[:-1]``) for backward, and their backward
returns ``(dq, dk, dv, None)``. The softmax scale is ``1/sqrt(D)``; use
:func:`flashattn2.flash_attention` for another scale, backend choice and
``torch.compile`` support.

:class:`ScaledAttention` is the same thing for already validated inputs, with
the scale and the backend as arguments: :func:`flashattn2.flash_attention` runs
it outside ``torch.compile`` (a plain autograd Function costs less host time per
call than the ``torch.library`` custom operators it uses when compiling).
"""

from __future__ import annotations

import torch

from flashattn2._inputs import backward_any_layout, check_attention_inputs, check_triton_device, forward_any_layout
from flashattn2._triton_backward import triton_backward
from flashattn2._triton_forward import triton_forward
from flashattn2.reference import tiled_backward, tiled_forward

# backend name -> (forward, backward) functions of the (B, H, N, D) layout
IMPLEMENTATIONS = {
    "triton": (triton_forward, triton_backward),
    "pytorch": (tiled_forward, tiled_backward),
}


def _forward(ctx, backend: str, q, k, v, is_causal: bool, softmax_scale: float) -> torch.Tensor:
    forward_impl, ctx.backward_impl = IMPLEMENTATIONS[backend]
    out, lse = forward_any_layout(forward_impl, q, k, v, is_causal, softmax_scale)
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.is_causal = is_causal
    ctx.softmax_scale = softmax_scale
    return out


def _backward(ctx, grad_out: torch.Tensor):
    return backward_any_layout(ctx.backward_impl, grad_out, *ctx.saved_tensors, ctx.is_causal, ctx.softmax_scale)


def _validated_scale(q, k, v, is_causal) -> float:
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal must be a bool; got {type(is_causal).__name__}")
    return check_attention_inputs(q, k, v)


class FlashAttention2PyTorch(torch.autograd.Function):
    """FlashAttention-2 tiled in plain PyTorch (:mod:`flashattn2.reference`); any device.

    ``FlashAttention2PyTorch.apply(q, k, v, is_causal)``: q ``(B, Nq, D)`` or
    ``(B, H, Nq, D)``; k, v ``(B, Nk, D)`` or ``(B, Hkv, Nk, D)`` with
    ``H % Hkv == 0``; fp16, bf16 or fp32. Returns O with q's shape and dtype.

    Example::

        >>> q, k, v = (torch.randn(2, 8, 16, requires_grad=True) for _ in range(3))
        >>> FlashAttention2PyTorch.apply(q, k, v, True).sum().backward()
        >>> q.grad.shape
        torch.Size([2, 8, 16])
    """

    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        return _forward(ctx, "pytorch", q, k, v, is_causal, _validated_scale(q, k, v, is_causal))

    @staticmethod
    def backward(ctx, grad_out):
        return *_backward(ctx, grad_out), None


class FlashAttention2Triton(torch.autograd.Function):
    """FlashAttention-2 with the Triton kernels; CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1``.

    Same interface as :class:`FlashAttention2PyTorch`. Gradients are deterministic
    (no atomics): identical inputs give bitwise-identical dq, dk, dv.

    Example (on a GPU)::

        q, k, v = (torch.randn(1, 16, 4096, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        FlashAttention2Triton.apply(q, k, v, True).sum().backward()
    """

    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        scale = _validated_scale(q, k, v, is_causal)
        check_triton_device(q.device)
        return _forward(ctx, "triton", q, k, v, is_causal, scale)

    @staticmethod
    def backward(ctx, grad_out):
        return *_backward(ctx, grad_out), None


class ScaledAttention(torch.autograd.Function):
    """``apply(q, k, v, is_causal, softmax_scale, backend)`` on inputs already checked by
    :func:`~flashattn2._inputs.check_attention_inputs`, ``backend`` ``"triton"`` or
    ``"pytorch"`` already resolved for their device. Returns O with q's shape."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal, softmax_scale, backend):
        return _forward(ctx, backend, q, k, v, is_causal, softmax_scale)

    @staticmethod
    def backward(ctx, grad_out):
        return *_backward(ctx, grad_out), None, None, None
