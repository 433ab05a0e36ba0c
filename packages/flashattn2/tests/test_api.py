"""``flash_attention``: layouts, backends, errors, edge cases, determinism, torch.compile, the module."""

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import flashattn2
from flashattn2 import FlashAttention2PyTorch, FlashAttention2Triton, FlashSelfAttention, _inputs, flash_attention
from flashattn2.api import resolve_backend
from flashattn2.testing import assert_attention_matches_reference, naive_attention_float64

BACKENDS = [pytest.param("triton", marks=pytest.mark.triton_kernels), "pytorch"]


def _with(backend, **kwargs):
    return lambda q, k, v, causal: flash_attention(q, k, v, causal=causal, backend=backend, **kwargs)


def test_public_api():
    assert set(flashattn2.__all__) == {
        "__version__",
        "flash_attention",
        "FlashAttention2Triton",
        "FlashAttention2PyTorch",
        "FlashSelfAttention",
    }


@pytest.mark.parametrize("backend", BACKENDS)
def test_views_of_one_packed_qkv_tensor(backend):
    # (B, N, 3 * H, D) from one projection, split into q, k, v views with strides.
    packed = torch.randn(2, 21, 3 * 2, 24)
    q, k, v = packed.transpose(1, 2).chunk(3, dim=1)
    assert not any(x.is_contiguous() for x in (q, k, v))
    assert_attention_matches_reference(_with(backend), q, k, v, causal=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_custom_softmax_scale(backend):
    q, k, v = torch.randn(1, 2, 17, 16), torch.randn(1, 2, 23, 16), torch.randn(1, 2, 23, 16)
    assert_attention_matches_reference(_with(backend, softmax_scale=0.9), q, k, v, softmax_scale=0.9)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scale", [-0.9, 0.0])
@pytest.mark.parametrize("causal", [False, True])
def test_negative_and_zero_softmax_scale(backend, scale, causal):
    # Logits of a few hundred: a row maximum taken on the wrong side of the scores overflows exp.
    q, k, v = 8 * torch.randn(1, 2, 19, 16), torch.randn(1, 2, 40, 16), torch.randn(1, 2, 40, 16)
    assert_attention_matches_reference(_with(backend, softmax_scale=scale), q, k, v, causal=causal, softmax_scale=scale)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_of_a_non_contiguous_output_gradient(backend):
    # out.sum() back-propagates an expanded (stride 0) gradient; a transposed one has odd strides.
    q, k, v = (torch.randn(1, 2, 18, 16) for _ in range(3))
    grad_out = torch.randn(1, 2, 16, 18).transpose(-1, -2)
    assert_attention_matches_reference(_with(backend), q, k, v, causal=True, grad_out=grad_out)
    assert_attention_matches_reference(_with(backend), q, k, v, grad_out=torch.ones(1, 1, 1, 1).expand(q.shape))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "q_shape, kv_shape",
    [
        ((2, 0, 16), (2, 5, 16)),
        ((2, 2, 0, 16), (2, 1, 0, 16)),
        ((0, 2, 4, 16), (0, 2, 4, 16)),
        ((1, 3, 16), (1, 0, 16)),
        ((1, 0, 4, 16), (1, 0, 4, 16)),
        ((1, 0, 4, 16), (1, 2, 4, 16)),
    ],
    ids=["no-queries", "no-queries-no-keys", "no-batch", "no-keys", "no-heads", "no-query-heads"],
)
def test_empty_sequences(backend, q_shape, kv_shape):
    q = torch.randn(q_shape, requires_grad=True)
    k = torch.randn(kv_shape, requires_grad=True)
    v = torch.randn(kv_shape, requires_grad=True)
    out = flash_attention(q, k, v, causal=True, backend=backend)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert torch.equal(out, torch.zeros(q.shape))  # no keys: every query's output is 0 (as in the reference)
    assert torch.equal(out, naive_attention_float64(q, k, v, causal=True)[0].float())
    out.sum().backward()
    for x in (q, k, v):
        assert x.grad.shape == x.shape and torch.equal(x.grad, torch.zeros(x.shape))


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the interpreter's numpy, on purpose
@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_and_inf_propagate(backend):
    q, k, v = (torch.randn(1, 1, 20, 16) for _ in range(3))
    q[0, 0, 3, 5] = float("nan")  # one query row
    q[..., 2] = q[..., 2].abs()
    k[0, 0, 17, 2] = float("inf")  # one key scoring +inf: every query that sees it (causal: rows >= 17) gets NaN
    out = flash_attention(q, k, v, causal=True, backend=backend)
    ref = naive_attention_float64(q, k, v, causal=True)[0]
    assert torch.equal(out.isnan(), ref.isnan())
    assert out[0, 0, 3].isnan().all() and out[0, 0, 17:].isnan().all()
    finite_rows = [i for i in range(20) if i != 3 and i < 17]
    assert out[0, 0, finite_rows].isfinite().all()


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_in_a_query_row_reaches_every_gradient_that_depends_on_it(backend):
    # Causal, Nq = Nk = 40: query 5 sees keys 0..5. What depends on it is NaN; other
    # queries' O and dq and the dv of keys it does not see stay finite (their dk need
    # not: masked pairs in a tile with a NaN query row give 0 * NaN, see the README).
    q, k, v = (torch.randn(1, 1, 40, 16) for _ in range(3))
    q[0, 0, 5, 3] = float("nan")
    q, k, v = (x.requires_grad_(True) for x in (q, k, v))
    out = flash_attention(q, k, v, causal=True, backend=backend)
    out.backward(torch.randn_like(out))
    row_5 = torch.arange(40) == 5
    assert torch.equal(out.isnan()[0, 0], row_5[:, None].expand(40, 16))
    assert torch.equal(q.grad.isnan()[0, 0], row_5[:, None].expand(40, 16))
    assert k.grad[0, 0, :6].isnan().all() and v.grad[0, 0, :6].isnan().all()
    assert v.grad[0, 0, 6:].isfinite().all()


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize(
    "function, outcomes",
    [
        pytest.param(FlashAttention2Triton, ("zero", "nan"), marks=pytest.mark.triton_kernels, id="triton"),
        pytest.param(FlashAttention2PyTorch, ("zero",), id="pytorch"),
    ],
)
@pytest.mark.parametrize(
    "n", [10, 40]
)  # under the interpreter: one masked key tile; two unmasked ones and a ragged one
def test_a_row_whose_scores_are_all_minus_inf(function, outcomes, n):
    # -inf in q[row, 3] against keys whose component 3 is positive: every score of the row is -inf.
    # README: O = 0 with L = -inf (as SDPA), or NaN from Triton key tiles without masks; other rows unaffected.
    q, k, v = (torch.randn(1, 1, n, 16) for _ in range(3))
    k[..., 3] = k[..., 3].abs()
    q[0, 0, 7, 3] = float("-inf")
    out = function.apply(q.requires_grad_(True), k, v, False)
    lse = out.grad_fn.saved_tensors[4]
    outcome = "zero" if torch.equal(out[0, 0, 7], torch.zeros(16)) and lse[0, 0, 7] == float("-inf") else "nan"
    assert outcome in outcomes
    if outcome == "nan":
        assert out[0, 0, 7].isnan().all() and lse[0, 0, 7].isnan()
    others = torch.arange(n) != 7
    expected = naive_attention_float64(q, k, v)[0][..., others, :]
    torch.testing.assert_close(out[..., others, :].double(), expected, rtol=0, atol=1e-5)


@pytest.mark.triton_kernels
def test_triton_gradients_are_bitwise_deterministic():
    q = torch.randn(1, 4, 37, 40, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, 2, 45, 40, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, 2, 45, 40, dtype=torch.bfloat16, requires_grad=True)
    grad_out = torch.randn(1, 4, 37, 40, dtype=torch.bfloat16)
    runs = []
    for _ in range(2):
        out = FlashAttention2Triton.apply(q, k, v, True)
        runs.append((out, *torch.autograd.grad(out, (q, k, v), grad_out)))
    for first, second in zip(*runs):
        assert torch.equal(first, second)


@pytest.mark.parametrize("interpret_now", ["0", "1"], ids=["TRITON_INTERPRET=0-now", "TRITON_INTERPRET=1-now"])
@pytest.mark.parametrize("built_for_interpreter", [False, True], ids=["built-for-gpu", "built-for-interpreter"])
def test_backend_resolution(monkeypatch, built_for_interpreter, interpret_now):
    # Triton builds the kernels for its interpreter or for a GPU when flashattn2 is imported;
    # CPU tensors go to them only when they were built for the interpreter and it is still on.
    monkeypatch.setattr(_inputs, "KERNELS_INTERPRETED", built_for_interpreter)
    monkeypatch.setenv("TRITON_INTERPRET", interpret_now)
    cpu = torch.device("cpu")
    triton_on_cpu = built_for_interpreter and interpret_now == "1"
    assert resolve_backend("auto", cpu) == ("triton" if triton_on_cpu else "pytorch")
    assert resolve_backend("pytorch", cpu) == "pytorch"
    if triton_on_cpu:
        assert resolve_backend("triton", cpu) == "triton"
    else:
        changed = built_for_interpreter != (interpret_now == "1")
        with pytest.raises(ValueError, match="when flashattn2 was imported" if changed else "set TRITON_INTERPRET=1"):
            resolve_backend("triton", cpu)
    with pytest.raises(ValueError, match="backend must be one of"):
        resolve_backend("cuda", cpu)
    with pytest.raises(ValueError, match="needs CUDA"):
        resolve_backend("triton", torch.device("meta"))


def test_backend_resolution_remembers_only_accepted_cuda_devices(monkeypatch):
    # An accepted CUDA device skips the check on later calls; everything else is checked every time.
    import flashattn2.api as api

    accepted = torch.device("cuda", 0)
    monkeypatch.setattr(api, "_TRITON_CUDA_DEVICES", set())
    monkeypatch.setattr(_inputs, "_capabilities", {0: (9, 0)})
    assert resolve_backend("auto", accepted) == "triton"
    assert {accepted} == api._TRITON_CUDA_DEVICES
    monkeypatch.setattr(_inputs, "_capabilities", {0: (7, 5)})  # no second check for a remembered device
    assert resolve_backend("triton", accepted) == "triton"
    assert resolve_backend("pytorch", accepted) == "pytorch"
    with pytest.raises(ValueError, match="backend must be one of"):
        resolve_backend("cuda", accepted)
    _inputs._capabilities[1] = (7, 5)
    with pytest.raises(ValueError, match=r"compute capability >= 8\.0"):
        resolve_backend("auto", torch.device("cuda", 1))
    assert {accepted} == api._TRITON_CUDA_DEVICES


def test_functorch_transforms_take_autograd_functions_documented_route():
    # flash_attention calls the autograd Function's C implementation directly in eager mode;
    # under a functorch transform it goes through Function.apply, which refuses a Function
    # without setup_context instead of returning a silently wrong derivative.
    q, k, v = (torch.randn(1, 2, 8, 16) for _ in range(3))
    with pytest.raises(RuntimeError, match="setup_context"):
        torch.func.grad(lambda q: flash_attention(q, k, v, backend="pytorch").sum())(q)


def test_setting_triton_interpret_after_import_keeps_cpu_tensors_on_pytorch():
    # The reported failure: kernels built for a GPU at import, TRITON_INTERPRET=1 set
    # afterwards; backend="auto" sent CPU tensors to them ("RuntimeError: 0 active drivers").
    script = textwrap.dedent(
        """
        import os
        import torch
        from flashattn2 import flash_attention
        from flashattn2.testing import naive_attention_float64

        os.environ["TRITON_INTERPRET"] = "1"
        q, k, v = (torch.randn(1, 2, 9, 16) for _ in range(3))
        out = flash_attention(q, k, v, causal=True)
        expected = naive_attention_float64(q, k, v, causal=True)[0]
        torch.testing.assert_close(out.double(), expected, rtol=0, atol=1e-5)
        try:
            flash_attention(q, k, v, backend="triton")
        except ValueError as error:
            assert "when flashattn2 was imported" in str(error), error
        else:
            raise AssertionError("backend='triton' ran CPU tensors through kernels built for a GPU")
        """
    )
    env = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    package_root = str(Path(flashattn2.__file__).parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("backend", BACKENDS)
def test_second_derivatives_are_refused_with_a_clear_error(backend):
    # A gradient penalty: differentiate a function of dq, which needs attention's second derivative.
    q, k, v = (torch.randn(1, 2, 20, 16, requires_grad=True) for _ in range(3))
    out = flash_attention(q, k, v, causal=True, backend=backend)
    (dq,) = torch.autograd.grad(out.square().sum(), q, create_graph=True)
    with pytest.raises(RuntimeError, match="flash_attention has no second derivative"):
        dq.square().sum().backward()


@pytest.mark.parametrize("backend", BACKENDS)
def test_create_graph_alone_gives_the_first_derivatives(backend):
    # create_graph=True is fine as long as nothing differentiates through attention's gradients.
    q, k, v = (torch.randn(1, 2, 20, 16, requires_grad=True) for _ in range(3))
    grads = torch.autograd.grad(flash_attention(q, k, v, backend=backend).square().sum(), (q, k, v), create_graph=True)
    expected = torch.autograd.grad(flash_attention(q, k, v, backend=backend).square().sum(), (q, k, v))
    for got, want in zip(grads, expected):
        assert torch.equal(got, want)


def test_eager_calls_skip_the_custom_operator_dispatch():
    # Outside torch.compile the plain autograd Function runs (less host time per call);
    # the custom operators are for the compiler (compared with eager in the next test).
    q, k, v = (torch.randn(1, 2, 9, 16, requires_grad=True) for _ in range(3))
    out = flash_attention(q, k, v, backend="pytorch")
    assert type(out.grad_fn).__name__ == "ScaledAttentionBackward"


def test_torch_compile_fullgraph_has_no_graph_break():
    # aot_eager: Dynamo and AOTAutograd trace forward and backward graphs (graph
    # breaks would fail fullgraph=True) without Inductor's slow CPU codegen. The
    # compiled model runs the custom operators, the eager one ScaledAttention.
    model = FlashSelfAttention(embed_dim=32, num_heads=4, num_kv_heads=2, causal=True)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    x = torch.randn(2, 11, 32, requires_grad=True)
    out = compiled(x)
    out.sum().backward()
    grad_compiled = x.grad.clone()
    x.grad = None
    eager = model(x)
    eager.sum().backward()
    torch.testing.assert_close(out, eager)
    torch.testing.assert_close(grad_compiled, x.grad)


def test_module_matches_naive_attention_with_its_weights():
    model = FlashSelfAttention(embed_dim=48, num_heads=3, num_kv_heads=1, causal=True, bias=True)
    x = torch.randn(2, 9, 48)
    qkv = model.qkv(x).view(2, 9, 5, 16).transpose(1, 2)
    q, k, v = qkv[:, :3], qkv[:, 3:4], qkv[:, 4:5]
    o = naive_attention_float64(q, k, v, causal=True)[0].float()
    expected = model.out(o.transpose(1, 2).reshape(2, 9, 48))
    torch.testing.assert_close(model(x), expected, rtol=1e-5, atol=1e-5)


def test_module_rejects_bad_head_counts():
    with pytest.raises(ValueError, match="multiple of num_heads"):
        FlashSelfAttention(embed_dim=50, num_heads=4)
    with pytest.raises(ValueError, match="num_kv_heads"):
        FlashSelfAttention(embed_dim=48, num_heads=4, num_kv_heads=3)


def _qkv(q_shape=(2, 4, 8, 16), kv_shape=(2, 4, 8, 16), dtype=torch.float32):
    return torch.randn(q_shape, dtype=dtype), torch.randn(kv_shape, dtype=dtype), torch.randn(kv_shape, dtype=dtype)


ERRORS = {
    "q-rank": (lambda: (torch.randn(8, 16), *_qkv()[1:]), ValueError, "q must have 3 or 4 dimensions"),
    "k-rank": (lambda: (_qkv()[0], torch.randn(2, 8, 16), _qkv()[2]), ValueError, "k must have as many dimensions"),
    "kv-shape": (lambda: (*_qkv()[:2], torch.randn(2, 4, 9, 16)), ValueError, "k and v must have the same shape"),
    "head-dim": (lambda: _qkv(kv_shape=(2, 4, 8, 32)), ValueError, "same head dimension"),
    "head-dim-too-big": (lambda: _qkv((1, 1, 4, 320), (1, 1, 4, 320)), ValueError, r"must be in 1\.\.256; got 320"),
    "batch": (lambda: _qkv(kv_shape=(3, 4, 8, 16)), ValueError, "same batch size"),
    "kv-heads": (lambda: _qkv(kv_shape=(2, 3, 8, 16)), ValueError, r"k/v heads \(k.shape\[1\] = 3\) must divide"),
    "dtype": (lambda: _qkv(dtype=torch.float64), TypeError, "q.dtype must be torch.float16, torch.bfloat16"),
    "mixed-dtypes": (lambda: (*_qkv()[:2], _qkv()[2].half()), TypeError, "same dtype"),
    "not-a-tensor": (lambda: (_qkv()[0], _qkv()[1].numpy(), _qkv()[2]), TypeError, "k must be a torch.Tensor"),
    "devices": (lambda: (*_qkv()[:2], torch.empty(2, 4, 8, 16, device="meta")), ValueError, "same device"),
    "sparse": (
        lambda: (_qkv()[0].to_sparse(), *_qkv()[1:]),
        TypeError,
        r"q must be a dense tensor \(layout torch.strided\); got layout torch.sparse_coo",
    ),
    "sparse-csr": (
        lambda: (*_qkv()[:2], torch.randn(2, 4, 8, 16).to_sparse_csr()),
        TypeError,
        r"v must be a dense tensor \(layout torch.strided\); got layout torch.sparse_csr",
    ),
    "nested": (
        lambda: (*_qkv()[:1], torch.nested.nested_tensor([torch.randn(8, 16)] * 2, layout=torch.jagged), _qkv()[2]),
        TypeError,
        "k must be a dense tensor .* not a nested tensor",
    ),
}


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state")
@pytest.mark.parametrize("make_inputs, error, message", ERRORS.values(), ids=ERRORS.keys())
def test_bad_inputs_raise_clear_errors(make_inputs, error, message):
    q, k, v = make_inputs()
    with pytest.raises(error, match=message):
        flash_attention(q, k, v)
    with pytest.raises(error, match=message):
        FlashAttention2PyTorch.apply(q, k, v, False)


def test_bad_options_raise_clear_errors():
    q, k, v = _qkv()
    with pytest.raises(TypeError, match="causal must be a bool"):
        flash_attention(q, k, v, causal=1)
    with pytest.raises(TypeError, match="is_causal must be a bool"):
        FlashAttention2PyTorch.apply(q, k, v, "yes")
    with pytest.raises(TypeError, match="softmax_scale must be a real number"):
        flash_attention(q, k, v, softmax_scale="0.1")
    with pytest.raises(ValueError, match="softmax_scale must be finite"):
        flash_attention(q, k, v, softmax_scale=math.inf)
    with pytest.raises(ValueError, match="backend must be one of"):
        flash_attention(q, k, v, backend="cudnn")
