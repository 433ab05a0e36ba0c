"""Running an implementation's forward or backward, in eager mode and under ``torch.compile``.

:func:`attention_forward` and :func:`attention_backward` take validated tensors
of either layout and a resolved backend. In eager mode they call the
implementation directly. While ``torch.compile`` traces they call the same
implementation through two ``torch.library`` custom operators
(``flashattn2::attention_forward``, ``flashattn2::attention_backward``) that
have fake (shape-only) implementations: the compiler sees each as one opaque
node, so a model that calls :func:`flashattn2.flash_attention` compiles with
``fullgraph=True``. Eager calls skip the operators' dispatch, which costs host
time on every call.
"""

from __future__ import annotations

import torch

from flashattn2._inputs import backward_any_layout, forward_any_layout
from flashattn2._triton_backward import triton_backward
from flashattn2._triton_forward import triton_forward
from flashattn2.reference import tiled_backward, tiled_forward


def _pytorch_backward(grad_out, q, k, v, out, lse, causal, softmax_scale, one_allocation):
    """The tiled PyTorch backward in the Triton launcher's signature."""
    return tiled_backward(grad_out, q, k, v, out, lse, causal, softmax_scale)


# backend name -> (forward, backward) functions of the (B, H, N, D) layout
IMPLEMENTATIONS = {
    "triton": (triton_forward, triton_backward),
    "pytorch": (tiled_forward, _pytorch_backward),
}


def attention_forward(q, k, v, causal: bool, softmax_scale: float, backend: str):
    """-> ``(O, L)``: O with q's shape, L float32 with ``q.shape[:-1]``."""
    if torch.compiler.is_compiling():
        return _forward_op(q, k, v, causal, softmax_scale, backend)
    return forward_any_layout(IMPLEMENTATIONS[backend][0], q, k, v, causal, softmax_scale)


def attention_backward(grad_out, q, k, v, out, lse, causal: bool, softmax_scale: float, backend: str):
    """-> ``(dq, dk, dv)`` with the shapes of q, k, v."""
    if torch.compiler.is_compiling():
        return _backward_op(grad_out, q, k, v, out, lse, causal, softmax_scale, backend)
    return backward_any_layout(IMPLEMENTATIONS[backend][1], grad_out, q, k, v, out, lse, causal, softmax_scale, True)


@torch.library.custom_op("flashattn2::attention_forward", mutates_args=())
def _forward_op(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, softmax_scale: float, backend: str
) -> tuple[torch.Tensor, torch.Tensor]:
    return forward_any_layout(IMPLEMENTATIONS[backend][0], q, k, v, causal, softmax_scale)


@_forward_op.register_fake
def _(q, k, v, causal, softmax_scale, backend):
    return q.new_empty(q.shape), q.new_empty(q.shape[:-1], dtype=torch.float32)


@torch.library.custom_op("flashattn2::attention_backward", mutates_args=())
def _backward_op(
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
    # An operator's outputs may not alias each other: three allocations.
    return backward_any_layout(IMPLEMENTATIONS[backend][1], grad_out, q, k, v, out, lse, causal, softmax_scale, False)


@_backward_op.register_fake
def _(grad_out, q, k, v, out, lse, causal, softmax_scale, backend):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)
