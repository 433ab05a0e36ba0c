"""Both autograd Functions against the float64 naive reference: O, L, dq, dk, dv.

Tiny shapes (the Triton kernels run in Triton's CPU interpreter with 16x16 tiles),
chosen so that every case spans several tiles, ragged last tiles, and, when
causal, diagonal tiles, skipped tiles and (Nq > Nk) rows that see no key.
"""

import pytest
import torch

from flashattn2 import FlashAttention2PyTorch, FlashAttention2Triton
from flashattn2.testing import (
    assert_attention_matches_reference,
    assert_close_to_reference,
    max_abs_logit,
    naive_attention,
)


@pytest.fixture(params=["one-launch", "two-launches"])
def backward_launches(request, monkeypatch):
    """The Triton backward as one launch (what short fp16 and bf16 sequences run) or as its two kernels (the
    others). The one launch is forced in fp32 too: its masking, grouped heads and ragged tiles are checked
    against the float64 reference at fp32's precision."""
    import flashattn2._triton_backward as backward

    one_launch = request.param == "one-launch"
    monkeypatch.setattr(backward, "ONE_LAUNCH_MAX_SCORES", 2**62 if one_launch else 0)
    if one_launch:
        monkeypatch.setattr(backward, "ONE_LAUNCH_DTYPES", (*backward.ONE_LAUNCH_DTYPES, torch.float32))
    backward.backward_plan.cache_clear()  # a plan decides at its construction
    yield
    backward.backward_plan.cache_clear()


FUNCTIONS = [
    pytest.param(FlashAttention2Triton, marks=pytest.mark.triton_kernels, id="triton"),
    pytest.param(FlashAttention2PyTorch, id="pytorch"),
]

# (q shape, k/v shape): (B, N, D) and (B, H, N, D), odd and unequal lengths,
# head dims that are not powers of two, grouped-query and multi-query heads.
SHAPES = {
    "3d-square-D16": ((2, 33, 16), (2, 33, 16)),
    "4d-Nq<Nk-D40": ((1, 2, 19, 40), (1, 2, 37, 40)),
    "4d-Nq>Nk-D24": ((1, 2, 37, 24), (1, 2, 21, 24)),
    "gqa-4:2-D16": ((1, 4, 29, 16), (1, 2, 29, 16)),
    "mqa-3:1-D40-single-row": ((1, 3, 1, 40), (1, 1, 18, 40)),
}


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shapes", SHAPES.values(), ids=SHAPES.keys())
def test_fp32_matches_float64_reference(function, causal, shapes, backward_launches):
    q_shape, kv_shape = shapes
    q, k, v = torch.randn(q_shape), torch.randn(kv_shape), torch.randn(kv_shape)
    assert_attention_matches_reference(function.apply, q, k, v, causal=causal)


# Draws of the single-row multi-query case where the rounding of the saved logsumexp, from which the backward
# recomputes P = exp(s - L), takes the float32 gradients' error past a floor that counts max|s| alone: with one
# query row |L| (up to max|s| + log Nk) is the larger term.
@pytest.mark.triton_kernels
@pytest.mark.parametrize("backward_launches", ["one-launch"], indirect=True)
@pytest.mark.parametrize("seed", [177, 387])
def test_fp32_single_row_draws_that_needed_the_logsumexp_in_the_floor(seed, backward_launches):
    torch.manual_seed(seed)
    q_shape, kv_shape = SHAPES["mqa-3:1-D40-single-row"]
    q, k, v = torch.randn(q_shape), torch.randn(kv_shape), torch.randn(kv_shape)
    assert_attention_matches_reference(FlashAttention2Triton.apply, q, k, v, causal=False)


# fp16/bf16: grouped-query with ragged tiles, and small square cases where a few
# long dot products dominate (there an fp32 -> bf16 conversion that truncates
# instead of rounding, as Triton's interpreter does, fails the rule in most draws).
SHAPES_16BIT = {
    "gqa-2:1-Nq<Nk-D40": ((1, 2, 27, 40), (1, 1, 35, 40)),
    "square-N8-D64": ((1, 1, 8, 64), (1, 1, 8, 64)),
    "square-N20-D16": ((1, 1, 20, 16), (1, 1, 20, 16)),
}


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shapes", SHAPES_16BIT.values(), ids=SHAPES_16BIT.keys())
def test_16bit_matches_float64_reference(function, dtype, causal, shapes, backward_launches):
    q_shape, kv_shape = shapes
    q = torch.randn(q_shape, dtype=dtype)
    k, v = torch.randn(kv_shape, dtype=dtype), torch.randn(kv_shape, dtype=dtype)
    assert_attention_matches_reference(function.apply, q, k, v, causal=causal)


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_saves_exactly_q_k_v_o_and_logsumexp(function, dtype):
    q = torch.randn(2, 2, 21, 16, dtype=dtype, requires_grad=True)
    k = torch.randn(2, 2, 26, 16, dtype=dtype, requires_grad=True)
    v = torch.randn(2, 2, 26, 16, dtype=dtype, requires_grad=True)
    out = function.apply(q, k, v, True)
    saved = out.grad_fn.saved_tensors
    assert len(saved) == 5
    assert all(s is x for s, x in zip(saved[:3], (q, k, v)))
    assert torch.equal(saved[3], out)
    lse = saved[4]
    assert lse.dtype == torch.float32 and lse.shape == q.shape[:-1]
    _, lse_ref = naive_attention(*(x.detach().double() for x in (q, k, v)), causal=True)
    _, lse_naive = naive_attention(*(x.detach() for x in (q, k, v)), causal=True)
    logit = max_abs_logit(q, k)
    assert_close_to_reference(lse.to(dtype), lse_ref, lse_naive, max_abs_logit=logit, name="L")


@pytest.mark.parametrize("function", FUNCTIONS)
def test_rows_that_see_no_key_give_zero_and_minus_inf(function):
    # Causal with Nq > Nk, bottom-right aligned: the first Nq - Nk = 9 queries see nothing.
    q = torch.randn(1, 1, 20, 16, requires_grad=True)
    k = torch.randn(1, 1, 11, 16, requires_grad=True)
    v = torch.randn(1, 1, 11, 16, requires_grad=True)
    out = function.apply(q, k, v, True)
    lse = out.grad_fn.saved_tensors[4]
    assert torch.equal(out[..., :9, :], torch.zeros(1, 1, 9, 16))
    assert torch.isneginf(lse[..., :9]).all() and lse[..., 9:].isfinite().all()
    out.sum().backward()
    assert torch.equal(q.grad[..., :9, :], torch.zeros(1, 1, 9, 16))
    assert all(t.grad.isfinite().all() for t in (q, k, v))


@pytest.mark.parametrize("function", FUNCTIONS)
def test_transposed_layout_without_copies(function):
    # (B, N, H, D) storage viewed as (B, H, N, D): strides, not copies.
    q = torch.randn(1, 30, 2, 16).transpose(1, 2)
    k = torch.randn(1, 22, 2, 16).transpose(1, 2)
    v = torch.randn(1, 22, 2, 16).transpose(1, 2)
    assert not q.is_contiguous()
    assert_attention_matches_reference(function.apply, q, k, v, causal=True)


@pytest.mark.triton_kernels
@pytest.mark.parametrize("head_group", [2, 3, 5])
@pytest.mark.parametrize(
    "shapes", [((3, 1, 37, 16), (3, 1, 45, 16)), ((1, 4, 29, 16), (1, 2, 29, 16))], ids=["3-pairs", "gqa-4:2"]
)
def test_causal_launches_interleave_pairs_in_groups(monkeypatch, head_group, shapes):
    # Causal launches of the Triton kernels take the pairs' tiles heaviest first, head_group (batch, head) pairs
    # at a time (on a GPU: all pairs where they stay in L2): each tile of each pair runs once whatever the group
    # size, the last group smaller or the only one larger than the pairs.
    import flashattn2._triton_backward as backward
    import flashattn2._triton_forward as forward

    monkeypatch.setattr(forward, "causal_head_group", lambda *_: head_group)
    monkeypatch.setattr(backward, "causal_head_group", lambda *_: head_group)
    monkeypatch.setattr(backward, "ONE_LAUNCH_MAX_SCORES", 0)  # the dQ and dK/dV kernels
    forward.forward_plan.cache_clear()  # plans decide at their construction
    backward.backward_plan.cache_clear()
    try:
        q_shape, kv_shape = shapes
        q, k, v = torch.randn(q_shape), torch.randn(kv_shape), torch.randn(kv_shape)
        assert_attention_matches_reference(FlashAttention2Triton.apply, q, k, v, causal=True)
    finally:
        forward.forward_plan.cache_clear()
        backward.backward_plan.cache_clear()
