"""Reference attention and the accuracy rule, for testing any attention implementation.

The rule: an implementation computing in dtype ``T`` is accurate enough when the
RMS error of each result (O, L, dq, dk, dv) against attention computed in
float64 is at most twice the error of plain PyTorch attention computed in ``T``
on the same inputs, plus a floor (:func:`error_floors`). NaN/Inf must appear
exactly where the reference has them. The floor bounds the rounding of the steps
FlashAttention takes that plain attention does not, and scales with the
root-sum-square of the terms each result is summed from, so that it holds where
the result is a cancellation plain attention computes exactly;
flashattn2's README derives it.

Example::

    >>> import torch
    >>> from flashattn2 import FlashAttention2PyTorch
    >>> from flashattn2.testing import assert_attention_matches_reference
    >>> q, k, v = (torch.randn(2, 3, 20, 16) for _ in range(3))
    >>> assert_attention_matches_reference(FlashAttention2PyTorch.apply, q, k, v, causal=True)
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

__all__ = [
    "assert_attention_matches_reference",
    "assert_close_to_reference",
    "attention_error",
    "error_bound",
    "error_floors",
    "max_abs_logit",
    "naive_attention",
    "naive_attention_float64",
]

# The allowed error is this many times the same-dtype naive attention's error.
ERROR_FACTOR = 2.0


def _per_query_head(x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """k or v with each k/v head repeated for the query heads that share it (grouped-query attention)."""
    if q.dim() == 4 and x.shape[1] != q.shape[1]:
        return x.repeat_interleave(q.shape[1] // x.shape[1], dim=1)
    return x


def _per_kv_head(x: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The inverse of :func:`_per_query_head` for gradients: a per-query-head tensor summed over
    the query heads that share each k/v head."""
    if q.dim() == 4 and k.shape[1] != q.shape[1]:
        return x.unflatten(1, (k.shape[1], q.shape[1] // k.shape[1])).sum(dim=2)
    return x


def _scale(q: torch.Tensor, softmax_scale: float | None) -> float:
    return 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else softmax_scale


def _scaled_scores(q: torch.Tensor, k: torch.Tensor, softmax_scale: float | None) -> torch.Tensor:
    """``scale * q k^T`` for every query/key pair (scale ``1/sqrt(D)`` by default)."""
    return q @ _per_query_head(k, q).transpose(-1, -2) * _scale(q, softmax_scale)


def _largest_abs(scores: torch.Tensor) -> float:
    """The largest finite ``|s|`` of ``scores`` (0 if there is none)."""
    finite = scores.abs()
    finite = finite[finite.isfinite()]
    return finite.max().item() if finite.numel() else 0.0


def _softmax(scores: torch.Tensor, causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``(P, L)`` from :func:`_scaled_scores` ``(..., Nq, Nk)``: the attention probabilities and each
    row's logsumexp ``(..., Nq)`` (mask as in :func:`naive_attention`); a row that sees no key has
    P = 0 and L = -inf."""
    n_q, n_k = scores.shape[-2:]
    if causal:
        i = torch.arange(n_q, device=scores.device)[:, None]
        j = torch.arange(n_k, device=scores.device)[None, :]
        visible = j <= i + (n_k - n_q)
    else:
        visible = torch.ones(n_q, n_k, dtype=torch.bool, device=scores.device)
    scores = scores.masked_fill(~visible, float("-inf"))
    row_sees_a_key = visible.any(dim=-1)
    # Rows that see nothing: softmax of a row of -inf is nan; those rows are defined as O = 0, L = -inf.
    safe_scores = torch.where(row_sees_a_key[:, None], scores, 0.0)
    probs = torch.where(row_sees_a_key[:, None], torch.softmax(safe_scores, dim=-1), 0.0)
    lse = torch.where(row_sees_a_key, torch.logsumexp(safe_scores, -1), float("-inf"))
    return probs, lse


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
    probs, lse = _softmax(_scaled_scores(q, k, softmax_scale), causal)
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


def _finite_rms(x: torch.Tensor) -> float:
    return _rms(x[x.isfinite()])


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


def error_floors(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    grad_out: torch.Tensor,
    *,
    causal: bool = False,
    softmax_scale: float | None = None,
) -> dict[str, float]:
    """The rule's floor (module docstring) for each of ``"O"``, ``"L"``, ``"dq"``, ``"dk"`` and ``"dv"``.

    Arguments:
        q, k, v: the inputs as for :func:`naive_attention`, in the dtype ``T`` the
            implementation computes in (float16, bfloat16, float32...).
        grad_out: the gradient of O that is back-propagated, O's shape (q's); any dtype.
        causal, softmax_scale: as for :func:`naive_attention`.

    Computed in float64 on q's device, with at most three Nq x Nk matrices per
    head alive at a time after the softmax (which needs what
    :func:`naive_attention_float64` needs). Non-finite entries are left out of
    the RMS, as in :func:`attention_error`.
    """
    unit_roundoff = torch.finfo(q.dtype).eps / 2
    scale_sq = _scale(q, softmax_scale) ** 2
    q, k, v = (x.detach().to(torch.float64) for x in (q, k, v))
    grad_out_sq = grad_out.detach().to(q.device, torch.float64).square()
    v_full = _per_query_head(v, q)
    scores = _scaled_scores(q, k, softmax_scale)
    float32_error = torch.finfo(torch.float32).eps * (1.0 + _largest_abs(scores))  # 1 + max|s|
    probs, lse = _softmax(scores, causal)
    # The backward recomputes P as exp(s - L) from the saved logsumexp: L's rounding too (1 + max|s| + max|L|).
    recomputed_error = float32_error + torch.finfo(torch.float32).eps * _largest_abs(lse)
    del scores
    out = probs @ v_full
    # Squared terms, summed by matrix products, then square roots: |x|_2 for every entry.
    # In place where possible: these are Nq x Nk matrices per head.
    p_sq = probs.square_()
    v_sq, k_sq, q_sq = v_full.square(), _per_query_head(k, q).square(), q.square()
    out_terms = (p_sq @ v_sq).sqrt_()
    dv_terms = _per_kv_head(p_sq.transpose(-1, -2) @ grad_out_sq, q, k).sqrt_()
    delta_sq = (grad_out_sq * out.square()).sum(dim=-1, keepdim=True)  # sum_d (dO_id O_id)^2
    ds_delta_sq = p_sq * delta_sq  # dS_ij's terms through Delta: P_ij dO_id O_id
    ds_sq = (grad_out_sq @ v_sq.transpose(-1, -2)).mul_(p_sq).add_(ds_delta_sq)  # and P_ij dO_id v_jd
    del p_sq, probs  # one tensor (squared in place): freed before the next products
    dq_terms = (ds_sq @ k_sq).mul_(scale_sq).sqrt_()
    dk_terms = _per_kv_head(ds_sq.transpose(-1, -2) @ q_sq, q, k).mul_(scale_sq).sqrt_()
    del ds_sq
    dq_delta_terms = (ds_delta_sq @ k_sq).mul_(scale_sq).sqrt_()
    dk_delta_terms = _per_kv_head(ds_delta_sq.transpose(-1, -2) @ q_sq, q, k).mul_(scale_sq).sqrt_()
    return {
        "O": float32_error * _finite_rms(out_terms),
        "L": float32_error * _finite_rms(lse),
        "dq": recomputed_error * _finite_rms(dq_terms) + unit_roundoff * _finite_rms(dq_delta_terms),
        "dk": recomputed_error * _finite_rms(dk_terms) + unit_roundoff * _finite_rms(dk_delta_terms),
        "dv": recomputed_error * _finite_rms(dv_terms),
    }


def error_bound(
    baseline: torch.Tensor, reference: torch.Tensor, max_abs_logit: float = 0.0, *, floor: float | None = None
) -> float:
    """The largest :func:`attention_error` allowed by the rule (see the module docstring).

    ``baseline`` is plain attention computed in the implementation's dtype (see
    :func:`naive_attention`), ``reference`` the float64 result.

    ``floor``: this quantity's entry of :func:`error_floors`. Without it, the
    floor is ``eps(float32) * (1 + max_abs_logit) * rms(reference)``
    (``max_abs_logit``: the largest ``|scale * q . k|`` of the inputs, see
    :func:`max_abs_logit`), which takes the reference's own size for the size of
    its terms: right for O and L, too small for a gradient that is a
    cancellation (zero with one key per query).
    """
    reference = reference.detach().to("cpu", torch.float64)
    if floor is None:
        floor = torch.finfo(torch.float32).eps * (1.0 + max_abs_logit) * _finite_rms(reference)
    return ERROR_FACTOR * attention_error(baseline, reference) + floor


def max_abs_logit(q: torch.Tensor, k: torch.Tensor, softmax_scale: float | None = None) -> float:
    """The largest finite ``|scale * q . k|`` over all query/key pairs, computed in float64 (shapes as in
    :func:`naive_attention`)."""
    q, k = (x.detach().to(torch.float64) for x in (q, k))
    return _largest_abs(_scaled_scores(q, k, softmax_scale))


def assert_close_to_reference(
    actual: torch.Tensor,
    reference: torch.Tensor,
    baseline: torch.Tensor,
    *,
    max_abs_logit: float = 0.0,
    floor: float | None = None,
    name: str = "output",
) -> None:
    """Assert the accuracy rule: ``error(actual) <= 2 * error(baseline) + floor`` (module docstring).

    Errors are :func:`attention_error` against ``reference``.

    Arguments:
        actual: the implementation's result (its dtype is the dtype the rule uses).
        reference: the same quantity in float64.
        baseline: the same quantity from plain attention in ``actual``'s dtype.
        max_abs_logit, floor: as for :func:`error_bound`: ``floor`` from
            :func:`error_floors`, or by default a floor from ``max_abs_logit``
            (:func:`max_abs_logit`) and the reference's size.
        name: names the quantity in the failure message.
    """
    if actual.shape != reference.shape:
        raise AssertionError(f"{name}: shape {tuple(actual.shape)} != reference shape {tuple(reference.shape)}")
    error = attention_error(actual, reference)
    bound = error_bound(baseline, reference, max_abs_logit, floor=floor)
    if not error <= bound:
        baseline_error = attention_error(baseline, reference)
        raise AssertionError(
            f"{name}: RMS error {error:.3g} vs the float64 reference exceeds the bound {bound:.3g} "
            f"(= {ERROR_FACTOR} x {baseline_error:.3g}, the error of naive {actual.dtype} attention, "
            f"+ floor {bound - ERROR_FACTOR * baseline_error:.3g})"
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
    floors = error_floors(q, k, v, grad_out, causal=causal, softmax_scale=softmax_scale)
    for name, actual, ref, base in zip(("O", "dq", "dk", "dv"), (out, *grads), reference, baseline):
        if ref is None:  # no key at all: the gradient is identically zero
            ref = torch.zeros(actual.shape, dtype=torch.float64)
            base = torch.zeros_like(actual)
        assert_close_to_reference(actual, ref, base, floor=floors[name], name=name)
