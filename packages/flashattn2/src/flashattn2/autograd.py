"""The two ``torch.autograd.Function`` classes: same algorithm, two implementations.

Both take ``apply(q, k, v, is_causal)`` and return O; both save exactly q, k, v,
O and the logsumexp L (float32, shape ``q.shape[:-1]``) for backward, and their
backward returns ``(dq, dk, dv, None)``. The softmax scale is ``1/sqrt(D)``; use
:func:`flashattn2.flash_attention` for another scale, backend choice and
``torch.compile`` support.
"""

from __future__ import annotations

from typing import Callable

import torch

from flashattn2._inputs import backward_any_layout, check_attention_inputs, check_triton_device, forward_any_layout
from flashattn2._triton_backward import triton_backward
from flashattn2._triton_forward import triton_forward
from flashattn2.reference import tiled_backward, tiled_forward


def _forward(ctx, forward_impl: Callable, q, k, v, is_causal) -> torch.Tensor:
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal must be a bool; got {type(is_causal).__name__}")
    scale = check_attention_inputs(q, k, v)
    out, lse = forward_any_layout(forward_impl, q, k, v, is_causal, scale)
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.is_causal = is_causal
    ctx.softmax_scale = scale
    return out


def _backward(ctx, backward_impl: Callable, grad_out: torch.Tensor):
    dq, dk, dv = backward_any_layout(backward_impl, grad_out, *ctx.saved_tensors, ctx.is_causal, ctx.softmax_scale)
    return dq, dk, dv, None


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
        return _forward(ctx, tiled_forward, q, k, v, is_causal)

    @staticmethod
    def backward(ctx, grad_out):
        return _backward(ctx, tiled_backward, grad_out)


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
        if isinstance(q, torch.Tensor):
            check_triton_device(q.device)
        return _forward(ctx, triton_forward, q, k, v, is_causal)

    @staticmethod
    def backward(ctx, grad_out):
        return _backward(ctx, triton_backward, grad_out)
