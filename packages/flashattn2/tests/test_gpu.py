"""GPU checks at realistic sizes (marker ``gpu``; skipped without CUDA).

Run on the GPU machine with::

    PYTHONPATH=packages/flashattn2/src python -m pytest packages/flashattn2/tests -m gpu -n 4

(``-n 4``, pytest-xdist: the kernels of each (dtype, head dim, causal) compile in parallel.)
"""

import json
import os
import subprocess
import sys
import weakref

import pytest
import torch

import flashattn2._triton_backward as backward
import flashattn2._triton_forward as forward
from flashattn2 import FlashAttention2Triton, FlashSelfAttention, flash_attention
from flashattn2._inputs import check_attention_inputs
from flashattn2._triton_backward import ONE_LAUNCH_MAX_SCORES
from flashattn2.testing import assert_attention_matches_reference

pytestmark = pytest.mark.gpu


def _inputs(q_shape, kv_shape, dtype):
    return tuple(torch.randn(shape, device="cuda", dtype=dtype) for shape in (q_shape, kv_shape, kv_shape))


def _backward_path(q, k, v, causal) -> str:
    """Which kernels the backward of ``flash_attention(q, k, v, causal=causal)`` runs (contiguous O and dO)."""
    plan = backward.plan_for(q, q, k, v, q, causal, check_attention_inputs(q, k, v))  # the default scale
    if plan.hopper is not None:
        return "hopper"
    return "one launch" if plan.one_launch else "two kernels"


def _hopper_kernel_runs_here() -> bool:
    if not torch.cuda.is_available():
        return False
    q = torch.empty(1, 16, 16384, 64, device="cuda", dtype=torch.bfloat16)
    return _backward_path(q, q, q, True) == "hopper"


hopper_only = pytest.mark.skipif(
    not _hopper_kernel_runs_here(), reason="the Hopper backward runs on compute capability 9.0 with Triton 3.6 to 3.9"
)


@pytest.fixture
def triton_kernels_only(monkeypatch):
    """The Hopper backward switched off, so that long sequences exercise the Triton kernels."""
    monkeypatch.setenv("FLASHATTN2_HOPPER_BACKWARD", "0")
    backward.backward_plan.cache_clear()  # plans decide at their construction
    yield
    backward.backward_plan.cache_clear()


@pytest.fixture
def hopper_at_small_shapes():
    """The Hopper kernels also below their thresholds (and the forward at every head dim and mask it is laid
    out for), so that small shapes exercise them."""
    import flashattn2._gluon_backward as hopper
    from flashattn2._hopper import below_thresholds

    with below_thresholds():
        backward.backward_plan.cache_clear()  # plans decide at their construction
        forward.forward_plan.cache_clear()
        yield hopper
        backward.backward_plan.cache_clear()
        forward.forward_plan.cache_clear()


# Every (dtype, head dim, causal) triple compiles its own kernels: the matrix is
# chosen to cover each dtype, mask and padding case without compiling all 36.
@pytest.mark.parametrize(
    "dtype, head_dim, causal",
    [
        (torch.bfloat16, 64, False),
        (torch.bfloat16, 64, True),
        (torch.bfloat16, 128, False),
        (torch.bfloat16, 128, True),
        (torch.float16, 64, True),
        (torch.float16, 128, False),
        (torch.float32, 64, True),
        (torch.float32, 128, False),
    ],
    ids=str,
)
def test_matches_float64_reference(dtype, head_dim, causal):
    # Odd lengths, Nq != Nk (bottom-right causal), grouped-query heads.
    q, k, v = _inputs((2, 4, 1000, head_dim), (2, 2, 1531, head_dim), dtype)
    assert_attention_matches_reference(FlashAttention2Triton.apply, q, k, v, causal=causal)


@pytest.mark.parametrize(
    "dtype, head_dim",
    [(torch.bfloat16, 40), (torch.float16, 80), (torch.bfloat16, 160), (torch.bfloat16, 256), (torch.float32, 256)],
    ids=str,
)
def test_head_dims_that_need_padding_or_small_tiles(dtype, head_dim):
    q, k, v = _inputs((1, 2, 777, head_dim), (1, 2, 777, head_dim), dtype)
    assert_attention_matches_reference(FlashAttention2Triton.apply, q, k, v, causal=True)


@pytest.mark.parametrize(
    "dtype, head_dim, causal, path",
    [
        (torch.bfloat16, 64, True, "one launch"),
        (torch.float16, 128, False, "one launch"),
        (torch.float32, 64, False, "two kernels"),
    ],
    ids=str,
)
def test_short_sequences_backward_matches_float64_reference(dtype, head_dim, causal, path):
    # Short fp16 and bf16 sequences run the backward as one launch, fp32 as two kernels: odd lengths,
    # Nq != Nk, grouped-query heads.
    q, k, v = _inputs((1, 4, 100, head_dim), (1, 2, 77, head_dim), dtype)
    assert ONE_LAUNCH_MAX_SCORES >= 1 * 4 * 100 * 77
    assert _backward_path(q, k, v, causal) == path
    assert_attention_matches_reference(FlashAttention2Triton.apply, q, k, v, causal=causal)


@pytest.mark.parametrize("dtype, head_dim", [(torch.bfloat16, 24), (torch.bfloat16, 32), (torch.float16, 64)], ids=str)
def test_short_causal_backward_as_two_kernels_matches_float64_reference(dtype, head_dim):
    # At most SHORT_CAUSAL_BACKWARD_LEN keys, too many scores for one launch and too few for the Hopper
    # backward: on Hopper the dQ and dK/dV kernels take their short-causal tiles. Odd lengths, Nq != Nk,
    # grouped-query heads.
    q, k, v = _inputs((4, 4, 1000, head_dim), (4, 2, 999, head_dim), dtype)
    assert _backward_path(q, k, v, True) == "two kernels"
    assert_attention_matches_reference(FlashAttention2Triton.apply, q, k, v, causal=True)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_matches_float64_reference_at_16k(causal, triton_kernels_only):
    # The Triton kernels at a long sequence (the Hopper backward's test follows). One head: the float64
    # reference materializes several 16384 x 16384 matrices (2 GiB each).
    q, k, v = _inputs((1, 1, 16384, 64), (1, 1, 16384, 64), torch.bfloat16)
    assert _backward_path(q, k, v, causal) == "two kernels"
    assert_attention_matches_reference(FlashAttention2Triton.apply, q, k, v, causal=causal)


@hopper_only
def test_hopper_backward_matches_float64_reference_at_16k(hopper_at_small_shapes):
    # Long waits in dQ's fixed order: causal query tile j is added to by j / 2 key tiles in turn.
    q, k, v = _inputs((1, 1, 16384, 64), (1, 1, 16384, 64), torch.bfloat16)
    assert _backward_path(q, k, v, True) == "hopper"
    assert_attention_matches_reference(FlashAttention2Triton.apply, q, k, v, causal=True)


@hopper_only
@pytest.mark.parametrize(
    "dtype, causal, q_shape, kv_shape",
    [
        (torch.bfloat16, True, (2, 4, 1000, 64), (2, 2, 1000, 64)),
        (torch.bfloat16, False, (2, 4, 1000, 64), (2, 2, 1000, 64)),
        (torch.float16, True, (1, 2, 1000, 64), (1, 2, 1000, 64)),
        (torch.float16, False, (1, 3, 2100, 64), (1, 1, 2100, 64)),
        (torch.bfloat16, True, (2, 4, 1000, 128), (2, 2, 1000, 128)),
        (torch.bfloat16, False, (1, 3, 2100, 128), (1, 1, 2100, 128)),
        (torch.float16, True, (1, 2, 1000, 128), (1, 2, 1000, 128)),
        # more (batch, head) pairs than the causal Hopper forward interleaves at once, and not a multiple of that
        (torch.bfloat16, True, (2, 5, 1000, 64), (2, 5, 1000, 64)),
        (torch.bfloat16, True, (3, 4, 1000, 128), (3, 2, 1000, 128)),
    ],
    ids=str,
)
def test_hopper_kernels_match_float64_reference(hopper_at_small_shapes, dtype, causal, q_shape, kv_shape):
    # Odd lengths (a ragged last query and key tile), grouped-query heads; the Hopper forward and backward.
    q, k, v = _inputs(q_shape, kv_shape, dtype)
    scale = check_attention_inputs(q, k, v)  # the default scale
    plan = backward.plan_for(q, q, k, v, q, causal, scale)
    forward_plan = forward.plan_for(q, k, v, causal, scale)
    assert plan.hopper is not None and forward_plan.hopper is not None
    assert_attention_matches_reference(FlashAttention2Triton.apply, q, k, v, causal=causal)
    assert plan.hopper.launched and forward_plan.hopper.launched


@hopper_only
@pytest.mark.parametrize(
    "dtype, causal, q_shape, kv_shape, scale",
    [
        (torch.bfloat16, True, (2, 4, 1000, 256), (2, 2, 1000, 256), None),
        (torch.float16, False, (1, 3, 1000, 256), (1, 3, 1000, 256), None),
        (torch.bfloat16, True, (1, 2, 1000, 256), (1, 2, 1000, 256), -0.3),
    ],
    ids=str,
)
def test_hopper_kernels_at_head_dim_256(hopper_at_small_shapes, dtype, causal, q_shape, kv_shape, scale):
    # The forward's 128-key tiles with P through shared memory, the backward's 64-key items whose consumers own half
    # of the head dimension each: odd lengths (a ragged last query and key tile), grouped-query heads, a negative
    # scale.
    q, k, v = _inputs(q_shape, kv_shape, dtype)
    scale = check_attention_inputs(q, k, v) if scale is None else scale
    plan = backward.plan_for(q, q, k, v, q, causal, scale)
    forward_plan = forward.plan_for(q, k, v, causal, scale)
    assert plan.hopper is not None and forward_plan.hopper is not None
    assert_attention_matches_reference(
        lambda q, k, v, c: flash_attention(q, k, v, causal=c, softmax_scale=scale),
        q,
        k,
        v,
        causal=causal,
        softmax_scale=scale,
    )
    assert plan.hopper.launched and forward_plan.hopper.launched


@hopper_only
@pytest.mark.parametrize(
    "dtype, causal, q_shape, kv_shape, scale",
    [
        (torch.bfloat16, True, (2, 4, 1000, 64), (2, 2, 1000, 64), None),
        (torch.float16, False, (1, 3, 2100, 64), (1, 1, 2100, 64), None),
        (torch.bfloat16, True, (1, 2, 1000, 64), (1, 2, 1000, 64), -0.3),
        # more (batch, head) pairs than the causal schedule interleaves at once
        (torch.bfloat16, True, (2, 5, 1000, 64), (2, 5, 1000, 64), None),
    ],
    ids=str,
)
def test_the_hopper_forward_with_three_consumers_matches_float64_reference(
    hopper_at_small_shapes, monkeypatch, dtype, causal, q_shape, kv_shape, scale
):
    # 192-row items (the last one ragged: at 1000 rows the 4-warp consumer's rows of it all past the end), whose
    # consumer warps wait and arrive on the barriers on their own; grouped-query heads, a negative scale. Forward
    # outputs bitwise equal when repeated.
    import flashattn2._gluon_forward as hopper_forward

    monkeypatch.setattr(hopper_forward, "THREE_CONSUMER_THRESHOLDS", {True: ((0, 0),), False: ((0, 0),)})
    q, k, v = _inputs(q_shape, kv_shape, dtype)
    scale = check_attention_inputs(q, k, v) if scale is None else scale
    forward_plan = forward.plan_for(q, k, v, causal, scale)
    assert forward_plan.hopper is not None and forward_plan.hopper.three_consumers

    def attention(q, k, v, c):
        return flash_attention(q, k, v, causal=c, softmax_scale=scale)

    assert_attention_matches_reference(attention, q, k, v, causal=causal, softmax_scale=scale)
    assert forward_plan.hopper.launched
    with torch.no_grad():
        outputs = [forward.triton_forward(q, k, v, causal, scale) for _ in range(3)]
    assert all(torch.equal(a, b) for other in outputs[1:] for a, b in zip(outputs[0], other))


@hopper_only
@pytest.mark.parametrize(
    "head_dim, causal, three_consumers",
    [
        (64, True, False),
        (64, False, True),
        (128, True, False),
        (128, False, False),
        (256, True, False),
        (256, False, False),
    ],
)
def test_the_hopper_forward_keeps_its_values_in_registers(monkeypatch, head_dim, causal, three_consumers):
    # The compiled forward's local memory per thread (the driver's count): ptxas spills registers there when it
    # holds too much across the key loop, and the reloads in each step cost time (at head dim 256 its hoisted
    # descriptors of Q, K and V: 152-168 bytes, 1.03-1.04x the time). At lengths that are not multiples of 16 the
    # causal head-dim-128 kernel (specialized for them) keeps 8 bytes there, stored and loaded once per item.
    import flashattn2._gluon_forward as hopper_forward

    rule = {True: ((0, 0),), False: ((0, 0),)} if three_consumers else {True: (), False: ()}
    monkeypatch.setattr(hopper_forward, "THREE_CONSUMER_THRESHOLDS", rule)
    q, k, v = _inputs((1, 2, 1024, head_dim), (1, 2, 1024, head_dim), torch.bfloat16)
    kernel = hopper_forward.HopperForward(q.shape, k.shape, q.dtype, q.device, causal, head_dim**-0.5)
    assert kernel.three_consumers == three_consumers
    kernel(q, k, v, torch.empty_like(q), torch.empty(1, 2, 1024, device="cuda"))
    assert kernel.kernel.kernel.n_spills == 0


@hopper_only
@pytest.mark.parametrize(
    "head_dim, causal, n, persistent",
    [
        (64, False, 2100, ("backward", "forward")),
        (64, True, 2100, ("backward", "forward")),
        (128, False, 2100, ("backward", "forward")),
        (128, True, 2100, ("backward", "forward")),  # the causal backward at 128 and 256: dealt interleaved
        (256, False, 1000, ("backward",)),  # the forward at head dim 256: one item per program
        (256, True, 2100, ("backward",)),
    ],
)
def test_persistent_hopper_kernels_take_several_items_per_program(
    hopper_at_small_shapes, monkeypatch, head_dim, causal, n, persistent
):
    # The persistent programs take their work items in turn: the backward's a key tile of a k/v head (non-causal)
    # or of a query head (causal), the forward's a query tile of a head; causal ones are dealt on the host. As an
    # MPS client with 15% of an H100 (19 of 132 multiprocessors), the 64 to 264 items of a ragged length with
    # grouped-query heads fall to 19 programs (a non-causal walk needs its key tiles at once: at head dim 256, with
    # 64 keys each, the length is shorter).
    monkeypatch.setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "15")
    q, k, v = _inputs((2, 4, n, head_dim), (2, 2, n, head_dim), torch.bfloat16)
    scale = check_attention_inputs(q, k, v)
    plans = {
        "backward": backward.plan_for(q, q, k, v, q, causal, scale),
        "forward": forward.plan_for(q, k, v, causal, scale),
    }
    for kind in persistent:
        hopper = plans[kind].hopper
        assert hopper is not None and hopper.items >= 3 * hopper.grid[0]
    assert_attention_matches_reference(FlashAttention2Triton.apply, q, k, v, causal=causal)
    assert all(plan.hopper.launched for plan in plans.values())


@hopper_only
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("scale", [-0.3, 0.0])
def test_hopper_kernels_with_a_negative_or_zero_softmax_scale(hopper_at_small_shapes, scale, head_dim):
    # Masked scores times a negative scale: the causal diagonal and the ragged last key tile.
    q, k, v = _inputs((1, 2, 1000, head_dim), (1, 2, 1000, head_dim), torch.bfloat16)
    assert _backward_path(q, k, v, True) == "hopper"
    assert_attention_matches_reference(
        lambda q, k, v, c: flash_attention(q, k, v, causal=c, softmax_scale=scale),
        q,
        k,
        v,
        causal=True,
        softmax_scale=scale,
    )


@hopper_only
@pytest.mark.parametrize(
    "n, head_dim, causal", [(385, 64, True), (2050, 64, False), (387, 128, False), (2051, 128, True), (386, 256, True)]
)
def test_the_hopper_backward_takes_lengths_that_are_not_a_multiple_of_4(hopper_at_small_shapes, n, head_dim, causal):
    # At such lengths a (batch, head)'s rows of L and Delta (fp32) in the forward's (B, H, N) layout start at
    # elements that are not 16-byte aligned, which a TMA load cannot take (the kernel would stop with an illegal
    # instruction): the kernel loads them from its prologue's per-tile workspace.
    q, k, v = _inputs((1, 2, n, head_dim), (1, 2, n, head_dim), torch.bfloat16)
    assert _backward_path(q, k, v, causal) == "hopper"
    assert_attention_matches_reference(FlashAttention2Triton.apply, q, k, v, causal=causal)


@hopper_only
def test_hopper_backward_takes_views_of_a_packed_qkv_tensor(hopper_at_small_shapes):
    packed = torch.randn(1, 2048, 3 * 4, 64, device="cuda", dtype=torch.bfloat16)
    q, k, v = packed.transpose(1, 2).chunk(3, dim=1)
    assert _backward_path(q, k, v, True) == "hopper"
    assert_attention_matches_reference(lambda q, k, v, c: flash_attention(q, k, v, causal=c), q, k, v, causal=True)


def test_views_of_a_packed_qkv_tensor():
    packed = torch.randn(2, 2048, 3 * 8, 64, device="cuda", dtype=torch.bfloat16)
    q, k, v = packed.transpose(1, 2).chunk(3, dim=1)
    assert_attention_matches_reference(lambda q, k, v, c: flash_attention(q, k, v, causal=c), q, k, v, causal=True)


@pytest.mark.parametrize(
    "q_shape, kv_shape, causal, path",
    [
        ((4, 16, 1024, 128), (4, 4, 1024, 128), True, "two kernels"),
        ((1, 4, 200, 64), (1, 2, 200, 64), True, "one launch"),
        pytest.param((2, 16, 4096, 64), (2, 4, 4096, 64), True, "hopper", marks=hopper_only),
        pytest.param((1, 8, 32768, 64), (1, 8, 32768, 64), True, "hopper", marks=hopper_only),
        pytest.param((2, 16, 8192, 64), (2, 16, 8192, 64), False, "hopper", marks=hopper_only),
        pytest.param((2, 16, 4096, 128), (2, 4, 4096, 128), True, "hopper", marks=hopper_only),
        pytest.param((1, 16, 2100, 128), (1, 4, 2100, 128), True, "hopper", marks=hopper_only),
        pytest.param((2, 16, 4096, 128), (2, 16, 4096, 128), False, "hopper", marks=hopper_only),
    ],
    ids=[
        "two-kernels",
        "one-launch",
        "hopper-causal",
        "hopper-causal-32k",
        "hopper-full",
        "hopper-d128-causal",
        "hopper-d128-causal-interleaved",
        "hopper-d128-full",
    ],
)
def test_gradients_are_bitwise_deterministic(q_shape, kv_shape, causal, path):
    q, k, v = _inputs(q_shape, kv_shape, torch.bfloat16)
    assert _backward_path(q, k, v, causal) == path
    grad_out = torch.randn_like(q)
    runs = []
    for _ in range(3):
        q_, k_, v_ = (x.clone().requires_grad_(True) for x in (q, k, v))
        out = FlashAttention2Triton.apply(q_, k_, v_, causal)
        runs.append((out, *torch.autograd.grad(out, (q_, k_, v_), grad_out)))
    for results in zip(*runs):
        assert all(torch.equal(results[0], other) for other in results[1:])


@pytest.mark.parametrize(
    "shape, path",
    [
        ((2, 8, 1024, 64), "two kernels"),
        ((1, 4, 128, 64), "one launch"),
        pytest.param((2, 16, 4096, 64), "hopper", marks=hopper_only),
    ],
    ids=["two-kernels", "one-launch", "hopper"],
)
def test_forward_backward_replays_in_a_cuda_graph(shape, path):
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    assert _backward_path(q, k, v, True) == path
    grad_out = torch.randn_like(q)

    def step():
        out = flash_attention(q, k, v, causal=True)
        return (out, *torch.autograd.grad(out, (q, k, v), grad_out))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up (compilation) off the capturing stream, as CUDA graphs require
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    with torch.no_grad():  # new values in the same tensors: the replay must see them
        for x in (q, k, v, grad_out):
            x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    for replayed, eager in zip(captured, step()):
        assert torch.equal(replayed, eager)


@hopper_only
def test_the_hopper_kernels_keep_no_tensor_of_a_call_alive():
    # Plans live as long as the process: a tensor they kept would hold its memory and, for an output, its autograd
    # graph with the saved inputs. A scale used nowhere else makes these calls their plans' first.
    scale = 0.1
    q, k, v = (torch.randn(2, 16, 4096, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out = flash_attention(q, k, v, causal=True, softmax_scale=scale)
    grad_out = torch.randn_like(out)
    torch.autograd.grad(out, (q, k, v), grad_out)
    assert forward.plan_for(q, k, v, True, scale).hopper is not None
    assert backward.plan_for(grad_out, q, k, v, out, True, scale).hopper is not None
    kept = [weakref.ref(x) for x in (out, grad_out)]
    del out, grad_out
    assert [ref() for ref in kept] == [None, None]


# A fresh process with an empty Triton cache runs ``body`` (a first forward and backward) and prints which thread
# compiled each kernel.
_RECORD_COMPILE_THREADS = """
import json, sys, threading, torch, triton
from flashattn2 import flash_attention
from flashattn2._hopper import below_thresholds
threads = {{}}
def record(*, fn, **_):
    threads.setdefault(fn.name, []).append(threading.current_thread().name)
triton.knobs.runtime.jit_post_compile_hook = record
{body}
torch.cuda.synchronize()
print(json.dumps(threads))
"""


def _compile_threads(tmp_path, body: str, *args: str, **env: str) -> dict[str, list[str]]:
    """Kernel name -> the names of the threads that compiled it, in a fresh process running ``body``."""
    child = subprocess.run(
        [sys.executable, "-c", _RECORD_COMPILE_THREADS.format(body=body), *args],
        env={**os.environ, "TRITON_CACHE_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(child.stdout.splitlines()[-1])


@pytest.mark.parametrize("background", ["1", "0"])
def test_the_backward_kernel_compiles_while_the_forward_runs(tmp_path, background):
    body = """
q, k, v = (torch.randn(4, 128, 64, device="cuda", requires_grad=True) for _ in range(3))
out = flash_attention(q, k, v, causal=True)
out.backward(torch.randn_like(out))
"""
    threads = _compile_threads(tmp_path, body, FLASHATTN2_BACKGROUND_COMPILE=background)
    assert threads["_forward_kernel"] == ["MainThread"]
    assert "_one_launch_kernel" not in threads  # fp32: two kernels at every length
    for kernel in ("_dq_kernel", "_dkdv_kernel"):
        [backward_thread] = threads[kernel]  # compiled once: by a worker, or by the backward's thread
        assert backward_thread.startswith("flashattn2-compile") == (background == "1")


@hopper_only
@pytest.mark.parametrize("head_dim", [64, 256])
def test_the_hopper_backward_compiles_while_the_forward_runs(tmp_path, head_dim):
    # Forced below its thresholds (bf16, causal, grouped-query heads: the kernel, its prologue and epilogue, and
    # the group sum).
    body = """
head_dim = int(sys.argv[1])
q = torch.randn(1, 4, 1000, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
k, v = (torch.randn(1, 2, 1000, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
with below_thresholds():
    out = flash_attention(q, k, v, causal=True)
    out.backward(torch.randn_like(out))
"""
    threads = _compile_threads(tmp_path, body, str(head_dim))
    assert threads["_hopper_forward_kernel"] == ["MainThread"]
    for kernel in ["_hopper_backward_kernel", "_prologue_kernel", "_causal_epilogue_kernel", "_group_sum_kernel"]:
        [thread] = threads[kernel]  # compiled once, by a worker
        assert thread.startswith("flashattn2-compile"), (kernel, thread)


def test_torch_compile_fullgraph_inductor():
    torch._dynamo.reset()
    model = FlashSelfAttention(embed_dim=512, num_heads=8, num_kv_heads=2, causal=True).cuda().bfloat16()
    compiled = torch.compile(model, fullgraph=True)
    x = torch.randn(2, 1024, 512, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    out = compiled(x)
    out.float().square().sum().backward()
    grad = x.grad.clone()
    x.grad = None
    eager = model(x)
    eager.float().square().sum().backward()
    torch.testing.assert_close(out, eager, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(grad, x.grad, rtol=2e-2, atol=2e-2)


def test_torch_compile_reduce_overhead_captures_the_kernels_in_cuda_graphs():
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model = FlashSelfAttention(embed_dim=256, num_heads=4, num_kv_heads=2, causal=True).cuda().bfloat16()
    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    xs = [torch.randn(2, 128, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(4)]
    steps = []
    for x in xs:  # the first steps warm up and record the graphs, the later ones replay them
        torch.compiler.cudagraph_mark_step_begin()
        out = compiled(x)
        out.float().square().sum().backward()
        steps.append((out.detach().clone(), x.grad.clone(), model.qkv.weight.grad.clone()))
        model.zero_grad(set_to_none=True)
    assert not counters["inductor"]["cudagraph_skips"], dict(counters["inductor"])
    for (out, grad_x, grad_weight), x in zip(steps, xs):
        x.grad = None
        eager = model(x)
        eager.float().square().sum().backward()
        torch.testing.assert_close(out, eager, rtol=2e-2, atol=2e-2)
        torch.testing.assert_close(grad_x, x.grad, rtol=2e-2, atol=2e-2)
        torch.testing.assert_close(grad_weight, model.qkv.weight.grad, rtol=2e-2, atol=2e-2)
        model.zero_grad(set_to_none=True)


def _extra_memory_of_forward_backward(n: int, heads: int = 16, head_dim: int = 64) -> int:
    """Peak bytes allocated during a causal forward + backward, above the inputs and dO."""
    q, k, v = (
        torch.randn(1, heads, n, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3)
    )
    grad_out = torch.randn_like(q)
    # A first run compiles and (Triton 3.6 even with one configuration) benchmarks
    # through do_bench, whose 256 MB cache-flush buffer must not count.
    torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), grad_out)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = flash_attention(q, k, v, causal=True)
    torch.autograd.grad(out, (q, k, v), grad_out)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def test_long_sequence_memory_is_linear_in_n():
    heads, head_dim = 16, 64
    extra = {n: _extra_memory_of_forward_backward(n, heads, head_dim) for n in (32768, 65536, 131072)}
    # What must exist per token: O, dq, dk, dv (bf16, 2 bytes) and L, Delta (fp32, 4 bytes), for each head;
    # the Hopper backward adds dq in an fp32 workspace.
    q = torch.empty(1, heads, 32768, head_dim, device="cuda", dtype=torch.bfloat16)
    workspace = head_dim * 4 if _backward_path(q, q, q, True) == "hopper" else 0
    needed_per_token = heads * (4 * head_dim * 2 + 2 * 4 + workspace)
    for n, used in extra.items():
        assert used <= 1.5 * needed_per_token * n, (n, used)
    assert 1.8 <= extra[131072] / extra[65536] <= 2.2, extra


def test_benchmark_forward_backward_headline_shape(benchmark):
    """pytest-benchmark: causal forward + backward, B=1, H=16, N=16384, D=64, bf16 (numbers only, no assertion)."""
    q, k, v = (torch.randn(1, 16, 16384, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    grad_out = torch.randn_like(q)

    def step():
        torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), grad_out)
        torch.cuda.synchronize()

    benchmark(step)
