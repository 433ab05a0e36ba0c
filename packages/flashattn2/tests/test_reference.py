"""The tiled PyTorch specification: any tile sizes give the naive result; no N x N tensor is saved."""

import math

import pytest
import torch

from flashattn2.reference import tiled_backward, tiled_forward
from flashattn2.testing import naive_attention


@pytest.mark.parametrize("tile_rows, tile_cols", [(1, 1), (7, 5), (16, 64), (64, 16)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_any_tiling_gives_the_naive_result_in_float32(tile_rows, tile_cols, causal):
    q = torch.randn(1, 4, 23, 16, dtype=torch.float64)
    k, v = torch.randn(1, 2, 19, 16, dtype=torch.float64), torch.randn(1, 2, 19, 16, dtype=torch.float64)
    grad_out = torch.randn(1, 4, 23, 16, dtype=torch.float64)
    scale = 1 / math.sqrt(16)
    inputs = [x.clone().requires_grad_(True) for x in (q, k, v)]
    o_ref, lse_ref = naive_attention(*inputs, causal=causal)
    grads_ref = torch.autograd.grad(o_ref, inputs, grad_out)

    q32, k32, v32 = q.float(), k.float(), v.float()
    out, lse = tiled_forward(q32, k32, v32, causal, scale, tile_rows, tile_cols)
    grads = tiled_backward(grad_out.float(), q32, k32, v32, out, lse, causal, scale, tile_rows, tile_cols)
    # fp32 arithmetic on O(1) values: errors of a few 1e-7; 1e-5 separates that from any real mistake.
    torch.testing.assert_close(out.double(), o_ref, rtol=0, atol=1e-5)
    finite = lse_ref.isfinite()
    assert torch.equal(finite, lse.isfinite())
    torch.testing.assert_close(lse.double()[finite], lse_ref[finite], rtol=0, atol=1e-5)
    for got, expected in zip(grads, grads_ref):
        torch.testing.assert_close(got.double(), expected, rtol=0, atol=1e-4)
