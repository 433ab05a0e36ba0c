"""The ``torch.autograd.Function`` behind every entry point, and the two public ones.

:class:`ScaledAttention` is the one path: ``apply(q, k, v, causal,
softmax_scale, backend)`` on validated inputs with a resolved
backend. It saves exactly q, k, v, O and the logsumexp L (float32, shape
``q.shape[:-1]``) for backward and runs the kernels through
:mod:`flashattn2._ops` (directly in eager mode, as ``torch.library`` operators
under ``torch.compile``). :func:`flashattn2.flash_attention` calls it through
:func:`scaled_attention`.

:class:`FlashAttention2Triton` and :class:`FlashAttention2PyTorch` are the same
Function with the interface ``apply(q, k, v, is_causal)``: they validate the
inputs, use the scale ``1/sqrt(D)`` and fix the backend.

Second derivatives are refused: the backward is not itself differentiable, so
differentiating through its results (a gradient penalty, a Hessian-vector
product, ``create_graph=True`` followed by a second backward through the
attention) raises a ``RuntimeError`` that says so, instead of returning a
silently wrong result.
"""

from __future__ import annotations

import torch

from flashattn2._inputs import check_attention_inputs, check_triton_device
from flashattn2._ops import attention_backward, attention_forward

NO_DOUBLE_BACKWARD = (
    b"flash_attention has no second derivative: its backward pass is not differentiable, so gradients of its "
    b"gradients (double backward: gradient penalties, Hessian-vector products) cannot be computed through it. "
    b"For those, compute attention with differentiable operations, e.g. "
    b"torch.nn.functional.scaled_dot_product_attention under "
    b"torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH)."
)


def _refuse_differentiation(grads: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """``grads`` behind a node that raises :data:`NO_DOUBLE_BACKWARD` if anything is
    differentiated through them (for a backward that runs with ``create_graph=True``)."""
    refuse = torch._C._functions.DelayedError(NO_DOUBLE_BACKWARD, len(grads))
    return refuse(*(g.detach().requires_grad_() for g in grads))


class ScaledAttention(torch.autograd.Function):
    """``apply(q, k, v, causal, softmax_scale, backend) -> O`` (q's shape).

    Inputs already checked by :func:`~flashattn2._inputs.check_attention_inputs`;
    ``backend`` ``"triton"`` or ``"pytorch"``, already resolved for their device.
    """

    @staticmethod
    def forward(ctx, q, k, v, causal: bool, softmax_scale: float, backend: str):
        out, lse = attention_forward(q, k, v, causal, softmax_scale, backend)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.softmax_scale, ctx.backend = causal, softmax_scale, backend
        return out

    @staticmethod
    def backward(ctx, grad_out):
        args = (grad_out, *ctx.saved_tensors, ctx.causal, ctx.softmax_scale, ctx.backend)
        if not torch.is_grad_enabled():  # the usual backward: autograd records nothing here
            return *attention_backward(*args), None, None, None
        # backward(create_graph=True): compute without recording, and refuse differentiation through the result
        with torch.no_grad():
            grads = attention_backward(*args)
        return *_refuse_differentiation(grads), None, None, None


# ``Function.apply`` is a Python layer over this C implementation: it binds default
# arguments for ``setup_context`` and routes functorch transforms, neither of which
# ScaledAttention needs in plain eager mode, and it costs about a tenth of an eager
# forward+backward's host time at short sequences (benchmarks/NOTES.md, v31).
_apply_in_c = torch._C._FunctionBase.__dict__["apply"].__get__(None, ScaledAttention)


def scaled_attention(q, k, v, causal: bool, softmax_scale: float, backend: str) -> torch.Tensor:
    """``ScaledAttention.apply(q, k, v, causal, softmax_scale, backend)``, without
    ``Function.apply``'s Python layer in eager mode outside functorch transforms."""
    if torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active():
        return ScaledAttention.apply(q, k, v, causal, softmax_scale, backend)
    return _apply_in_c(q, k, v, causal, softmax_scale, backend)


def _validated_scale(q, k, v, is_causal) -> float:
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal must be a bool; got {type(is_causal).__name__}")
    return check_attention_inputs(q, k, v)


class FlashAttention2PyTorch(ScaledAttention):
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
        scale = _validated_scale(q, k, v, is_causal)
        return ScaledAttention.forward(ctx, q, k, v, is_causal, scale, "pytorch")

    @staticmethod
    def backward(ctx, grad_out):
        return *ScaledAttention.backward(ctx, grad_out)[:3], None


class FlashAttention2Triton(ScaledAttention):
    """FlashAttention-2 with the Triton kernels; CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1``.

    Same interface as :class:`FlashAttention2PyTorch`. Gradients are deterministic:
    identical inputs give bitwise-identical dq, dk, dv.

    Example (on a GPU)::

        q, k, v = (
            torch.randn(1, 16, 4096, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3)
        )
        FlashAttention2Triton.apply(q, k, v, True).sum().backward()
    """

    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        scale = _validated_scale(q, k, v, is_causal)
        check_triton_device(q.device)
        return ScaledAttention.forward(ctx, q, k, v, is_causal, scale, "triton")

    @staticmethod
    def backward(ctx, grad_out):
        return *ScaledAttention.backward(ctx, grad_out)[:3], None
