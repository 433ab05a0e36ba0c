"""Reference attention and the accuracy rule, for testing any attention implementation.

The rule: an implementation computing in dtype ``T`` is accurate enough when its
error against attention computed in float64 is at most twice the error of plain
PyTorch attention computed in ``T`` on the same inputs, plus a tiny floor.
Errors are root-mean-square differences; NaN/Inf must appear exactly where the
reference has them.

The floor is ``eps(float32) * (1 + max|logit|) * rms(reference)``. FlashAttention
recomputes probabilities as ``exp(s - L)`` from the saved logsumexp in float32,
whose relative error grows by about one float32 epsilon per unit of ``|s|``
(``s`` = scaled logit). Naive attention subtracts the row maximum first and does
not pay this, so with large logits a float32 kernel can exceed twice the naive
float32 error by this much (measured on 2026-11-22: up to 6.5 eps * rms at
``max|s|`` near 30). For 16-bit dtypes the floor is negligible against the naive
error. This measures
the implementation against what the dtype allows instead of a fixed tolerance.

Example::

    >>> import torch
    >>> from flashattn2 import FlashAttention2PyTorch
    >>> from flashattn2.testing import assert_attention_matches_reference
    >>> q, k, v = (torch.randn(2, 3, 20, 16) for _ in range(3))
    >>> assert_attention_matches_reference(FlashAttention2PyTorch.apply, q, k, v, causal=True)
"""

from __future__ import annotations

import math
from typing import Callable

import torch

__all__ = [
    "naive_attention",
    "naive_attention_float64",
    "attention_error",
    "error_bound",
    "max_abs_logit",
    "assert_close_to_reference",
    "assert_attention_matches_reference",
]

# The allowed error is this many times the same-dtype naive attention's error.
ERROR_FACTOR = 2.0


def _per_query_head(x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """k or v with each k/v head repeated for the query heads that share it (grouped-query attention)."""
    if q.dim() == 4 and x.shape[1] != q.shape[1]:
        return x.repeat_interleave(q.shape[1] // x.shape[1], dim=1)
    return x


def _scaled_scores(q: torch.Tensor, k: torch.Tensor, softmax_scale: float | None) -> torch.Tensor:
    """``scale * q k^T`` for every query/key pair (scale ``1/sqrt(D)`` by default)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else softmax_scale
    return q @ _per_query_head(k, q).transpose(-1, -2) * scale


def naive_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    softmax_scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention the textbook way (the full Nq x Nk score matrix), in the inputs' dtype.

    Arguments:
        q: ``(B, Nq, D)`` or ``(B, H, Nq, D)``; k, v: ``(B, Nk, D)`` or
            ``(B, Hkv, Nk, D)`` with ``H % Hkv == 0`` (query head h uses k/v head
            ``h // (H // Hkv)``).
        causal: bottom-right aligned: query i sees key j iff ``j <= i + Nk - Nq``.
        softmax_scale: defaults to ``1/sqrt(D)``.

    Returns:
        ``(O, L)``: O with q's shape and dtype; L ``q.shape[:-1]``, the natural-log
        logsumexp of each row's scaled scores. A query that sees no key gets O = 0
        and L = -inf. Differentiable in q, k and v.
    """
    scores = _scaled_scores(q, k, softmax_scale)
    n_q, n_k = q.shape[-2], k.shape[-2]
    if causal:
        i = torch.arange(n_q, device=q.device)[:, None]
        j = torch.arange(n_k, device=q.device)[None, :]
        visible = j <= i + (n_k - n_q)
    else:
        visible = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device)
    scores = scores.masked_fill(~visible, float("-inf"))
    row_sees_a_key = visible.any(dim=-1)
    # Rows that see nothing: softmax of a row of -inf is nan; those rows are defined as O = 0, L = -inf.
    safe_scores = torch.where(row_sees_a_key[:, None], scores, 0.0)
    probs = torch.where(row_sees_a_key[:, None], torch.softmax(safe_scores, dim=-1), 0.0)
    lse = torch.where(row_sees_a_key, torch.logsumexp(safe_scores, -1), float("-inf"))
    return probs @ _per_query_head(v, q), lse


def naive_attention_float64(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    softmax_scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`naive_attention` computed in float64 from copies of the inputs, on their device: the reference.

    The returned tensors are float64 and carry gradients to the float64 copies
    only, never to the given tensors.
    """
    q64, k64, v64 = (x.detach().to(torch.float64) for x in (q, k, v))
    return naive_attention(q64, k64, v64, causal=causal, softmax_scale=softmax_scale)


def _rms(x: torch.Tensor) -> float:
    return x.pow(2).mean().sqrt().item() if x.numel() else 0.0


def attention_error(actual: torch.Tensor, reference: torch.Tensor) -> float:
    """Root-mean-square difference over the reference's finite entries, computed in float64.

    NaN and infinite entries must sit at the same positions (and infinities have
    the same sign) as in the reference; otherwise the error is ``inf``. The RMS
    (rather than the maximum) keeps the rule's 2x margin stable from one random
    draw to the next.
    """
    actual = actual.detach().to("cpu", torch.float64)
    reference = reference.detach().to("cpu", torch.float64)
    finite = reference.isfinite()
    same_nan = (actual.isnan() == reference.isnan()).all()
    same_inf = (actual[~finite].nan_to_num() == reference[~finite].nan_to_num()).all()  # NaN -> 0 on both sides
    if not (same_nan and same_inf):
        return math.inf
    return _rms(actual[finite] - reference[finite])


def error_bound(baseline: torch.Tensor, reference: torch.Tensor, max_abs_logit: float = 0.0) -> float:
    """The largest :func:`attention_error` allowed by the rule (see the module docstring).

    ``baseline`` is plain attention computed in the implementation's dtype (see
    :func:`naive_attention`), ``reference`` the float64 result, ``max_abs_logit``
    the largest ``|scale * q . k|`` of the inputs (see :func:`max_abs_logit`).
    """
    reference = reference.detach().to("cpu", torch.float64)
    floor = torch.finfo(torch.float32).eps * (1.0 + max_abs_logit) * _rms(reference[reference.isfinite()])
    return ERROR_FACTOR * attention_error(baseline, reference) + floor


def max_abs_logit(q: torch.Tensor, k: torch.Tensor, softmax_scale: float | None = None) -> float:
    """The largest finite ``|scale * q . k|`` over all query/key pairs, computed in float64 (shapes as in
    :func:`naive_attention`)."""
    q, k = (x.detach().to(torch.float64) for x in (q, k))
    logits = _scaled_scores(q, k, softmax_scale).abs()
    logits = logits[logits.isfinite()]
    return logits.max().item() if logits.numel() else 0.0


def assert_close_to_reference(
    actual: torch.Tensor,
    reference: torch.Tensor,
    baseline: torch.Tensor,
    *,
    max_abs_logit: float = 0.0,
    name: str = "output",
) -> None:
    """Assert the accuracy rule: ``error(actual) <= 2 * error(baseline) + floor`` (module docstring).

    Errors are :func:`attention_error` against ``reference``.

    Arguments:
        actual: the implementation's result (its dtype is the dtype the rule uses).
        reference: the same quantity in float64.
        baseline: the same quantity from plain attention in ``actual``'s dtype.
        max_abs_logit: the inputs' largest ``|scale * q . k|`` (:func:`max_abs_logit`), for the floor.
        name: names the quantity in the failure message.
    """
    if actual.shape != reference.shape:
        raise AssertionError(f"{name}: shape {tuple(actual.shape)} != reference shape {tuple(reference.shape)}")
    error = attention_error(actual, reference)
    bound = error_bound(baseline, reference, max_abs_logit)
    if not error <= bound:
        raise AssertionError(
            f"{name}: RMS error {error:.3g} vs the float64 reference exceeds the bound {bound:.3g} "
            f"(= {ERROR_FACTOR} x the error of naive {actual.dtype} attention + floor)"
        )


def assert_attention_matches_reference(
    attention: Callable[..., torch.Tensor],
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    softmax_scale: float | None = None,
    grad_out: torch.Tensor | None = None,
) -> None:
    """Check ``attention(q, k, v, causal)``'s output and its gradients dq, dk, dv by the accuracy rule.

    Arguments:
        attention: called as ``attention(q, k, v, causal)`` (wrap it in a lambda for
            other signatures), returns O with q's shape.
        q, k, v: inputs as for :func:`naive_attention` (their values are copied; the
            given tensors are not modified and gain no ``.grad``).
        causal, softmax_scale: passed to the references; ``attention`` must apply
            the same scale.
        grad_out: the gradient of O to back-propagate; fresh ``randn`` by default.
    """
    q_, k_, v_ = (x.detach().clone().requires_grad_(True) for x in (q, k, v))
    out = attention(q_, k_, v_, causal)
    if grad_out is None:
        grad_out = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q_, k_, v_), grad_out)

    def run_naive(dtype_inputs):
        inputs = [x.detach().clone().requires_grad_(True) for x in dtype_inputs]
        o, _ = naive_attention(*inputs, causal=causal, softmax_scale=softmax_scale)
        g = grad_out.to(device=o.device, dtype=o.dtype)
        return (o, *torch.autograd.grad(o, inputs, g, allow_unused=True))

    reference = run_naive([x.detach().to(torch.float64) for x in (q, k, v)])
    baseline = run_naive([q, k, v])
    logit = max_abs_logit(q, k, softmax_scale)
    for name, actual, ref, base in zip(("O", "dq", "dk", "dv"), (out, *grads), reference, baseline):
        if ref is None:  # no key at all: the gradient is identically zero
            ref = torch.zeros(actual.shape, dtype=torch.float64)
            base = torch.zeros_like(actual)
        assert_close_to_reference(actual, ref, base, max_abs_logit=logit, name=name)
