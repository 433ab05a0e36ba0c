"""The accuracy rule in flashattn2.testing rejects wrong attention, not only accepts right attention."""

import pytest
import torch

from flashattn2.testing import assert_attention_matches_reference, attention_error, naive_attention


def test_accepts_naive_attention_in_the_same_dtype():
    q, k, v = (torch.randn(1, 2, 12, 16, dtype=torch.bfloat16) for _ in range(3))
    assert_attention_matches_reference(lambda q, k, v, c: naive_attention(q, k, v, causal=c)[0], q, k, v, causal=True)


@pytest.mark.parametrize(
    "wrong, quantity",
    [
        (lambda q, k, v, c: naive_attention(q, k, v, causal=not c)[0], "O"),  # the other mask
        (lambda q, k, v, c: naive_attention(q, k, v, causal=c, softmax_scale=0.26)[0], "O"),  # scale 0.26, not 0.25
        (lambda q, k, v, c: naive_attention(q, k, v.detach(), causal=c)[0], "dv"),  # no gradient for v
    ],
    ids=["mask", "scale", "missing-gradient"],
)
def test_rejects_wrong_attention(wrong, quantity):
    q, k, v = (torch.randn(1, 2, 12, 16) for _ in range(3))
    with pytest.raises((AssertionError, RuntimeError), match=quantity if quantity != "dv" else None):
        assert_attention_matches_reference(wrong, q, k, v, causal=True)


def test_nan_where_the_reference_is_finite_is_an_infinite_error():
    reference = torch.randn(4, 4, dtype=torch.float64)
    actual = reference.float().clone()
    actual[1, 2] = float("nan")
    assert attention_error(actual, reference) == float("inf")
    assert attention_error(reference.float(), reference) < 1e-6
