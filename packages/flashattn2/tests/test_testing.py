"""The accuracy rule in flashattn2.testing rejects wrong attention, not only accepts right attention."""

import math

import pytest
import torch

from flashattn2 import flash_attention
from flashattn2.testing import (
    assert_attention_matches_reference,
    attention_error,
    error_floors,
    max_abs_logit,
    naive_attention,
)

BACKENDS = [pytest.param("triton", marks=pytest.mark.triton_kernels), "pytorch"]

# Shapes where the gradients are cancellations that naive attention computes exactly
# in any dtype: one key (dq = 0: the softmax of one score does not depend on it), and
# two keys with causal bottom-right alignment (the first 3 queries see none, the 4th
# one key, the 5th two keys: its dq is a difference of two terms).
CANCELLING_SHAPES = {
    "one-key": ((1, 2, 5, 16), (1, 2, 1, 16), False),
    "two-keys-causal": ((1, 2, 5, 16), (1, 2, 2, 16), True),
}
# Fresh draws per case: the earlier floor, rms(X)-based, failed 20-100% of the draws of these cases.
DRAWS = 10


def test_accepts_naive_attention_in_the_same_dtype():
    q, k, v = (torch.randn(1, 2, 12, 16, dtype=torch.bfloat16) for _ in range(3))
    assert_attention_matches_reference(lambda q, k, v, c: naive_attention(q, k, v, causal=c)[0], q, k, v, causal=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("q_shape, kv_shape, causal", CANCELLING_SHAPES.values(), ids=CANCELLING_SHAPES.keys())
def test_accepts_flash_attention_where_the_gradients_cancel(backend, dtype, q_shape, kv_shape, causal):
    def attention(q, k, v, causal):
        return flash_attention(q, k, v, causal=causal, backend=backend)

    for _ in range(DRAWS):
        q, k, v = (torch.randn(shape, dtype=dtype) for shape in (q_shape, kv_shape, kv_shape))
        assert_attention_matches_reference(attention, q, k, v, causal=causal)


def _with_dq_error(relative):
    """Naive attention with the right O but ``relative * grad_out`` added to dq."""

    def attention(q, k, v, causal):
        return naive_attention(q, k, v, causal=causal)[0] + relative * (q - q.detach())  # the added term is 0

    return attention


# fp32: 1e-4 is about 1000 float32 epsilons; fp16: 1e-2 about 10 float16 epsilons.
@pytest.mark.parametrize("dtype, relative", [(torch.float32, 1e-4), (torch.float16, 1e-2)], ids=["fp32", "fp16"])
@pytest.mark.parametrize("q_shape, kv_shape, causal", CANCELLING_SHAPES.values(), ids=CANCELLING_SHAPES.keys())
def test_rejects_a_small_gradient_error_where_the_gradients_cancel(dtype, relative, q_shape, kv_shape, causal):
    q, k, v = (torch.randn(shape, dtype=dtype) for shape in (q_shape, kv_shape, kv_shape))
    assert_attention_matches_reference(_with_dq_error(0.0), q, k, v, causal=causal)  # the wrapper itself is right
    with pytest.raises(AssertionError, match="dq"):
        assert_attention_matches_reference(_with_dq_error(relative), q, k, v, causal=causal)


@pytest.mark.parametrize(
    "wrong, quantity",
    [
        (lambda q, k, v, c: naive_attention(q, k, v, causal=not c)[0], "O"),  # the other mask
        (lambda q, k, v, c: naive_attention(q, k, v, causal=c, softmax_scale=0.26)[0], "O"),  # scale 0.26, not 0.25
        (lambda q, k, v, c: naive_attention(q, k, v.detach(), causal=c)[0], "dv"),  # no gradient for v
        (lambda q, k, v, c: naive_attention(q, k, v, causal=c)[0] * (1 + 1e-4), "O"),  # O off by 1e-4 relative
    ],
    ids=["mask", "scale", "missing-gradient", "perturbed-output"],
)
@pytest.mark.parametrize(
    "shapes", [((1, 2, 12, 16), (1, 2, 12, 16)), CANCELLING_SHAPES["two-keys-causal"][:2]], ids=["12-keys", "two-keys"]
)
def test_rejects_wrong_attention(wrong, quantity, shapes):
    q_shape, kv_shape = shapes
    q, k, v = (torch.randn(shape) for shape in (q_shape, kv_shape, kv_shape))
    with pytest.raises((AssertionError, RuntimeError), match=quantity if quantity != "dv" else None):
        assert_attention_matches_reference(wrong, q, k, v, causal=True)


def test_floors_follow_their_definition_with_one_key():
    # One key: P = 1, O_i = v_0, dP_i0 = Delta_i = dO_i . v_0, so the terms have closed forms.
    q, k, v = torch.randn(1, 2, 5, 16), torch.randn(1, 2, 1, 16), torch.randn(1, 2, 1, 16)
    grad_out = torch.randn(1, 2, 5, 16)
    floors = error_floors(q, k, v, grad_out)
    float32_error = torch.finfo(torch.float32).eps * (1 + max_abs_logit(q, k))
    # the gradients' P is recomputed from L, which with one key is the logit itself: max|L| = max|s|
    recomputed_error = torch.finfo(torch.float32).eps * (1 + 2 * max_abs_logit(q, k))
    unit_roundoff = torch.finfo(torch.float32).eps / 2
    q, k, v, grad_out = (x.double() for x in (q, k, v, grad_out))
    scale = 1 / math.sqrt(16)
    products = (grad_out.square() * v.square()).sum(-1, keepdim=True)  # sum_d dO_id^2 v_0d^2, (1, 2, 5, 1)

    def rms(x):
        return x.square().mean().sqrt().item()

    assert floors["O"] == pytest.approx(float32_error * rms(v.expand(1, 2, 5, 16)), rel=1e-12)
    dq_terms = scale * (2 * products).sqrt() * k.abs()  # P dP and P Delta: two equal sums of D products
    dq_delta_terms = scale * products.sqrt() * k.abs()
    assert floors["dq"] == pytest.approx(
        recomputed_error * rms(dq_terms) + unit_roundoff * rms(dq_delta_terms), rel=1e-12
    )
    assert floors["dq"] > 0  # while dq itself is exactly 0


def test_nan_where_the_reference_is_finite_is_an_infinite_error():
    reference = torch.randn(4, 4, dtype=torch.float64)
    actual = reference.float().clone()
    actual[1, 2] = float("nan")
    assert attention_error(actual, reference) == float("inf")
    assert attention_error(reference.float(), reference) < 1e-6
