"""The launchers' plumbing: launch plans, direct launches of compiled kernels, tile
choice, and the guard for the kernels' 32-bit offsets (no GPU needed: the Triton
JIT function is replaced by a recorder)."""

import itertools
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time
import types
import weakref

import pytest
import torch
import triton

import flashattn2._launch as launch_module
from flashattn2 import FlashAttention2Triton
from flashattn2._configs import Tile, TileKey, default_tile, shared_memory_bytes
from flashattn2._launch import CompiledLaunch, TileChooser, alignments
from flashattn2._triton_common import LOG2_E, contiguous_strides, needs_contiguous_copy
from flashattn2.testing import assert_attention_matches_reference

# what a launch with constexprs BLOCK=64 and MODE=1 and Tile(64, 32, 8, 3) passes Triton's JIT besides its arguments
JIT_KWARGS = {"BLOCK": 64, "MODE": 1, "num_warps": 8, "num_stages": 3, "launch_pdl": False, "enable_fp_fusion": True}


class _RecordingJIT:
    """Stands in for a ``@triton.jit`` function: ``fn[grid](...)`` records the launch and
    returns a compiled kernel whose ``run`` records the direct launches."""

    arg_names = ("X", "Y", "stride", "scale", "BLOCK", "MODE")
    __name__ = "kernel"

    def __init__(self):
        self.launches = []
        recorder = self

        class Compiled:
            function, packed_metadata = "function", "metadata"

            def run(self, *args):
                recorder.launches.append(("direct", args))

        self.compiled = Compiled()

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append(("jit", grid, args, kwargs))
            return self.compiled

        return launch


def test_first_launch_goes_through_the_jit_later_ones_call_the_compiled_kernel(monkeypatch):
    monkeypatch.setattr(launch_module, "KERNELS_INTERPRETED", False)
    streams = {3: 1234}  # the current stream of each device
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", streams.__getitem__, raising=False)  # CPU builds lack it
    fn = _RecordingJIT()
    tile = Tile(64, 32, 8, 3)
    launch = CompiledLaunch(fn, (5, 2, 1), (16, 0.5), {"BLOCK": 64, "MODE": 1}, tile, torch.device("cuda", 3))
    x, y = torch.randn(3), torch.randn(3)
    launch(x, y)
    launch(y, x)

    (how, grid, args, kwargs), (direct, run_args) = fn.launches
    assert how == "jit" and grid == (5, 2, 1) and args == (x, y, 16, 0.5)
    assert kwargs == JIT_KWARGS
    assert direct == "direct"
    # grid, the stream of the launch's device, function, metadata, launch metadata and hooks (none listen),
    # then every argument in order
    assert run_args[:9] == (5, 2, 1, 1234, "function", "metadata", None, None, None)
    assert run_args[9] is y and run_args[10] is x and run_args[11:] == (16, 0.5, 64, 1)


TILE = Tile(16, 16, 4, 1)


class CudaLauncher:
    """Triton 3.6's CUDA launcher as far as a launch needs it: ``__call__`` transcribes its source (scratch
    allocation left out, as the sizes are 0), ``launch`` records what its C launch function receives."""

    def __init__(self, global_scratch_size=0):
        self.launched = []
        self.launch_cooperative_grid, self.launch_pdl = False, True
        self.global_scratch_size, self.profile_scratch_size = global_scratch_size, 0

    def launch(self, *args):
        self.launched.append(args)

    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        cooperative, pdl = self.launch_cooperative_grid, self.launch_pdl
        self.launch(gridX, gridY, gridZ, stream, function, cooperative, pdl, None, None, *args)


class PackedCudaLauncher(CudaLauncher):
    """Triton 3.7's, likewise: one C launch function for every kernel, which takes the kernel's arguments as one
    sequence after their annotations and signature."""

    arg_annotations, kernel_signature = ("annotated",), b"signature"

    def __call__(self, gridX, gridY, gridZ, stream, function, kernel_metadata, launch_metadata, enter, leave, *args):
        cooperative, pdl = self.launch_cooperative_grid, self.launch_pdl
        self.launch(
            *(gridX, gridY, gridZ, stream, function, cooperative, pdl, kernel_metadata, launch_metadata, enter, leave),
            *(None, None, self.arg_annotations, self.kernel_signature, args),
        )


PackedCudaLauncher.__name__ = "CudaLauncher"  # Triton's name, which direct launches check

# each version's launcher: the two conventions of direct launches, and one whose launches go through run
LAUNCHERS = {"3.6.0": CudaLauncher, "3.7.1": PackedCudaLauncher, "3.9.0": PackedCudaLauncher, "3.5.1": CudaLauncher}


def on_a_cuda_launcher(monkeypatch, version="3.6.0", scratch=0) -> tuple[_RecordingJIT, CudaLauncher]:
    """``(fn, launcher)``: a recorded kernel compiled as on a CUDA device under Triton ``version``, whose
    ``run`` is that version's launcher (:data:`LAUNCHERS`); launches go to stream 99 of device 0."""
    monkeypatch.setattr(launch_module, "KERNELS_INTERPRETED", False)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", {0: 99}.__getitem__, raising=False)
    monkeypatch.setattr(triton, "__version__", version)
    fn = _RecordingJIT()
    fn.compiled.run = LAUNCHERS[version](scratch)
    return fn, fn.compiled.run


def same(a, b) -> bool:
    """Whether two launches' arguments are the same: tensors by identity, sequences item by item, the rest by
    equality (``==`` on tensors compares their elements)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return a is b
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("version", list(LAUNCHERS))
@pytest.mark.parametrize("scratch", [0, 128], ids=["no-scratch", "scratch"])
def test_later_launches_call_the_c_launcher_as_triton_s_launcher_would(monkeypatch, version, scratch):
    fn, launcher = on_a_cuda_launcher(monkeypatch, version, scratch)
    launch = CompiledLaunch(fn, (4, 3, 1), (16, 0.5), {"BLOCK": 64, "MODE": 1}, TILE, torch.device("cuda", 0))
    x, y = torch.randn(3), torch.randn(3)
    launch(x, y)  # through the JIT
    launch(y, x)
    # what the launcher's __call__ passes on, given CompiledLaunch's arguments to it
    launcher(4, 3, 1, 99, "function", "metadata", None, None, None, y, x, 16, 0.5, 64, 1)
    direct, through_call = launcher.launched
    assert direct[:4] == (4, 3, 1, 99) and same(direct, through_call)
    # the C function itself only where the version's convention was checked and no scratch is needed
    called_directly = version != "3.5.1" and not scratch
    assert launch.direct.launch == (launcher.launch if called_directly else launcher)
    assert launch.direct.packed == (called_directly and version in ("3.7.1", "3.9.0"))


def test_a_listening_profiler_gets_launch_metadata_through_run(monkeypatch):
    fn, launcher = on_a_cuda_launcher(monkeypatch)
    fn.compiled.launch_metadata = lambda grid, stream, *args: ("metadata of", grid, stream, args)
    launch = CompiledLaunch(fn, (2, 1, 1), (16, 0.5), {"BLOCK": 64, "MODE": 1}, TILE, torch.device("cuda", 0))
    x = torch.randn(3)
    launch(x, x)
    hook = triton.knobs.runtime.launch_enter_hook

    def listener(metadata):
        pass

    hook.add(listener)
    try:
        launch(x, x)
    finally:
        hook.remove(listener)
    # through the launcher's __call__: grid, stream, function, its flags and scratch, then the kernel's metadata,
    # the launch's metadata and the hooks
    (args,) = launcher.launched
    assert args[9:12] == ("metadata", ("metadata of", (2, 1, 1), 99, (x, x, 16, 0.5, 64, 1)), hook)
    assert args[13:] == (x, x, 16, 0.5, 64, 1)


# what Triton 3.6's launcher passes its C function before the kernel's arguments: grid, stream, function, the
# cooperative and PDL flags, scratch, kernel metadata, launch metadata and hooks
BASE_ARGS = 13
expansions = []  # the descriptors make_tensordesc_arg was called with


def make_tensordesc_arg(descriptor, metadata):
    """Stands in for Triton's (3.6 and 3.7, of the launcher's module): a map encoding the pointer, then shape and
    strides."""
    expansions.append(descriptor)
    return [("map", descriptor.base.data_ptr(), metadata), *descriptor.shape, *descriptor.strides]


def wrap_handle_tensordesc(launcher, tensordesc_indices, tensordesc_meta):
    """Transcribes Triton 3.6's wrapper of a C launch function for kernels that take TMA descriptors."""

    def inner(*args):
        final_args = list(args[:BASE_ARGS])
        tensordesc_idx = 0
        for i, arg in enumerate(args[BASE_ARGS:]):
            if i in tensordesc_indices:
                final_args.extend(make_tensordesc_arg(arg, tensordesc_meta[tensordesc_idx]))
                tensordesc_idx += 1
            else:
                final_args.append(arg)
        return launcher(*final_args)

    return inner


def wrap_handle_tensordesc_packed(launcher, tensordesc_indices, tensordesc_meta):
    """Transcribes Triton 3.7's, whose C function takes the kernel's arguments as its last argument."""

    def inner(*args):
        base_args = args[:-1]
        kernel_args = args[-1]

        final_kernel_args = []
        tensordesc_idx = 0
        for i, arg in enumerate(kernel_args):
            if i in tensordesc_indices:
                final_kernel_args.extend(make_tensordesc_arg(arg, tensordesc_meta[tensordesc_idx]))
                tensordesc_idx += 1
            else:
                final_kernel_args.append(arg)

        return launcher(*base_args, final_kernel_args)

    return inner


def wrap_handle_tensordesc_impl(launcher, tensordesc_indices, tensordesc_meta):
    """Stands in for Triton 3.8's and 3.9's wrapper (``triton.backends.driver``): 3.7's effect, through a function
    whose closure is not 3.7's (there: the descriptors' paths into the arguments and a C++ function expanding them)."""
    packed = wrap_handle_tensordesc_packed(launcher, tensordesc_indices, tensordesc_meta)

    def inner(*args):
        return packed(*args)

    return inner


WRAPPERS = {
    "3.6.0": wrap_handle_tensordesc,
    "3.7.1": wrap_handle_tensordesc_packed,
    "3.9.0": wrap_handle_tensordesc_impl,
}


@pytest.mark.parametrize("version", list(WRAPPERS))
def test_tma_descriptors_reach_the_c_launcher_expanded_once_per_pointer(monkeypatch, version):
    fn, launcher = on_a_cuda_launcher(monkeypatch, version)
    c_launch = launcher.launch
    launcher.launch = WRAPPERS[version](c_launch, {1}, [{"swizzle": 128}])  # Y is a descriptor
    launch = CompiledLaunch(fn, (4, 3, 1), (16, 0.5), {"BLOCK": 64, "MODE": 1}, TILE, torch.device("cuda", 0))

    def describe(tensor, strides=(8, 1)):
        return types.SimpleNamespace(base=tensor, shape=(2, 8), strides=strides, padding="zero")

    x, a, b = torch.randn(3), torch.randn(16), torch.randn(16)
    launch(x, describe(a))  # through the JIT
    expansions.clear()
    calls = [(x, describe(a)), (x, describe(b)), (b, describe(a)), (x, describe(a, strides=(16, 1)))]
    for tensors in calls:
        launch(*tensors)
    # the C function receives what Triton's wrapper would have passed it
    direct = c_launch.__self__.launched[-len(calls) :]
    for tensors in calls:
        launcher(4, 3, 1, 99, "function", "metadata", None, None, None, *tensors, 16, 0.5, 64, 1)
    assert same(direct, c_launch.__self__.launched[-len(calls) :])
    if version == "3.9.0":  # the wrapper is kept, and expands the descriptors on each launch
        assert [d.base for d in expansions] == [a, b, a, a] * 2
        assert launch.direct.launch is launcher.launch and launch.direct.expand is None
        return
    # one expansion for a's pointer, one for b's, none when a comes back, one when a's strides change
    assert [d.base for d in expansions[:3]] == [a, b, a] and expansions[2].strides == (16, 1)
    assert len(expansions) == 3 + len(calls)  # then the wrapper's own, one per call
    assert launch.direct.launch is c_launch


def test_a_programmatic_dependent_is_compiled_as_one():
    # Triton makes launch_pdl a compile option: the compiled kernel's launches then carry the attribute.
    fn = _RecordingJIT()
    launch = CompiledLaunch(
        fn, (1, 1, 1), (16, 0.5), {"BLOCK": 64, "MODE": 1}, Tile(16, 16, 4, 1), torch.device("cpu"), launch_pdl=True
    )
    launch(torch.randn(1), torch.randn(1))
    ((how, _, _, kwargs),) = fn.launches
    assert how == "jit" and kwargs["launch_pdl"] is True


def test_constexprs_out_of_order_are_refused():
    launch = CompiledLaunch(
        _RecordingJIT(), (1, 1, 1), (16, 0.5), {"MODE": 1, "BLOCK": 64}, Tile(16, 16, 4, 1), torch.device("cpu")
    )
    with pytest.raises(TypeError, match=r"constexprs must be \['BLOCK', 'MODE'\] in order"):
        launch(torch.randn(1), torch.randn(1))


def test_alignments_is_one_key_when_every_pointer_is_aligned_else_one_bool_per_tensor():
    x = torch.randn(64)
    assert alignments(x, x, x) is True
    assert alignments(x, x[1:], x) == (True, False, True)  # 4-byte offset: another kernel specialization


def test_tma_descriptors_check_the_first_tensor_and_equal_triton_s_for_later_ones():
    pytest.importorskip("triton.experimental.gluon.nvidia.hopper")
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from flashattn2._tma import TmaDescriptor

    block = [1, 1, 64, 32]
    layout = gl.NVMMASharedLayout.get_default_for(block, gl.bfloat16)
    transposed = TmaDescriptor(block, layout)
    with pytest.raises(AssertionError, match="stride"):  # Triton's own check, on the first call
        transposed(torch.randn(2, 3, 32, 128, dtype=torch.bfloat16).transpose(-1, -2))

    describe = TmaDescriptor(block, layout)
    packed = torch.randn(2, 128, 3, 4, 32, dtype=torch.bfloat16)  # (B, N, q/k/v, H, D), viewed as (B, H, N, D)
    for qkv in (0, 1, 2):
        view = packed[:, :, qkv].transpose(1, 2)
        got, expected = describe(view), TensorDescriptor.from_tensor(view, block, layout)
        assert type(got) is TensorDescriptor and got.base is view
        assert vars(got) == vars(expected)  # base (the same tensor), shape, strides, block, layout, padding


def test_tma_descriptors_keep_no_tensor_alive():
    # a plan lives as long as the process: a tensor it kept would keep its memory and, for an attention output,
    # the autograd graph that produced it
    pytest.importorskip("triton.experimental.gluon.nvidia.hopper")
    from triton.experimental.gluon import language as gl

    from flashattn2._tma import TmaDescriptor

    block = [1, 1, 64, 32]
    describe = TmaDescriptor(block, gl.NVMMASharedLayout.get_default_for(block, gl.bfloat16))
    first, later = (torch.randn(2, 3, 128, 32, dtype=torch.bfloat16) for _ in range(2))
    alive = weakref.ref(first)
    describe(first)
    describe(later)
    del first
    assert alive() is None


def test_plans_are_cached_per_layout_and_alignment():
    from flashattn2._triton_forward import forward_plan

    layout = (
        (1, 2, 40, 16),
        (1280, 640, 16, 1),
        (1, 2, 40, 16),
        (1280, 640, 16, 1),
        (1280, 640, 16, 1),
        torch.float32,
        torch.device("cpu"),
        True,
        0.25,
    )
    plan = forward_plan(*layout, (True, True, True))
    assert forward_plan(*layout, (True, True, True)) is plan
    assert forward_plan(*layout, (True, False, True)) is not plan  # another compiled kernel specialization


def test_tile_chooser_uses_the_table_without_autotuning(monkeypatch):
    monkeypatch.delenv("FLASHATTN2_AUTOTUNE", raising=False)
    chooser = TileChooser()

    def never(tile):
        raise AssertionError("a default choice must not run the kernel")

    tile = chooser.choose(TileKey(64, torch.bfloat16, False, torch.device("cpu"), 16), never, "forward")
    assert tile == default_tile("forward", 64, torch.bfloat16, torch.device("cpu"))


def test_short_causal_forwards_on_hopper_take_their_own_tile(monkeypatch):
    import flashattn2._configs as configs
    import flashattn2._inputs as inputs

    monkeypatch.delenv("FLASHATTN2_AUTOTUNE", raising=False)
    monkeypatch.setattr(configs, "KERNELS_INTERPRETED", False)
    monkeypatch.setattr(inputs, "_capabilities", {0: (9, 0)})
    hopper = torch.device("cuda", 0)
    table = configs._HOPPER_DEFAULTS["forward"]
    short = configs.SHORT_CAUSAL_FORWARD_TILE
    assert short != table[(64, 2)] and short in configs._CANDIDATES["forward"]
    for head_dim in (16, 32, 64):
        for seq_len in (16, 256, configs.SHORT_CAUSAL_FORWARD_LEN):
            tile = TileChooser().choose(TileKey(head_dim, torch.bfloat16, True, hopper, seq_len), None, "forward")
            assert tile == short, (head_dim, seq_len)
    longer = 2 * configs.SHORT_CAUSAL_FORWARD_LEN
    assert default_tile("forward", 64, torch.float16, hopper, causal=True, seq_len=longer) == table[(64, 2)]
    assert default_tile("forward", 64, torch.bfloat16, hopper, causal=False, seq_len=256) == table[(64, 2)]
    assert default_tile("forward", 64, torch.bfloat16, hopper) == table[(64, 2)]  # no length given: the table's
    assert default_tile("forward", 128, torch.bfloat16, hopper, causal=True, seq_len=256) == table[(128, 2)]
    assert default_tile("forward", 64, torch.float32, hopper, causal=True, seq_len=256) == table[(64, 4)]


def test_short_causal_backwards_on_hopper_take_their_own_tiles(monkeypatch):
    import flashattn2._configs as configs
    import flashattn2._inputs as inputs

    monkeypatch.delenv("FLASHATTN2_AUTOTUNE", raising=False)
    monkeypatch.setattr(configs, "KERNELS_INTERPRETED", False)
    monkeypatch.setattr(inputs, "_capabilities", {0: (9, 0)})
    hopper = torch.device("cuda", 0)
    short = configs.SHORT_CAUSAL_BACKWARD_TILES
    for kernel in ("dq", "dkdv"):
        table = configs._HOPPER_DEFAULTS[kernel]
        assert short[kernel] != table[(64, 2)] and short[kernel] in configs._CANDIDATES[kernel]
        for dtype in (torch.bfloat16, torch.float16):
            for head_dim in (17, 32, 48, 64):
                for seq_len in (16, 256, configs.SHORT_CAUSAL_BACKWARD_LEN):
                    key = TileKey(head_dim, dtype, True, hopper, seq_len)
                    assert TileChooser().choose(key, None, kernel) == short[kernel], (kernel, dtype, head_dim, seq_len)
        longer = 2 * configs.SHORT_CAUSAL_BACKWARD_LEN
        assert default_tile(kernel, 64, torch.bfloat16, hopper, causal=True, seq_len=longer) == table[(64, 2)]
        assert default_tile(kernel, 64, torch.bfloat16, hopper, causal=False, seq_len=256) == table[(64, 2)]
        assert default_tile(kernel, 16, torch.bfloat16, hopper, causal=True, seq_len=256) == table[(64, 2)]
        assert default_tile(kernel, 65, torch.bfloat16, hopper, causal=True, seq_len=256) == table[(128, 2)]
        assert default_tile(kernel, 128, torch.bfloat16, hopper, causal=True, seq_len=256) == table[(128, 2)]
        assert default_tile(kernel, 64, torch.float32, hopper, causal=True, seq_len=256) == table[(64, 4)]
    # the one-launch backward keeps the dK/dV table's tile, and its candidates
    one_launch = TileChooser().choose(TileKey(64, torch.bfloat16, True, hopper, 128), None, "one_launch")
    assert one_launch == configs._HOPPER_DEFAULTS["dkdv"][(64, 2)]
    monkeypatch.setitem(configs._max_shared_memory, 0, 227 * 1024)  # an H100 block's (CUDA C++ Programming Guide)
    candidates = configs.candidate_tiles("one_launch", 64, torch.bfloat16, hopper)
    assert candidates and candidates == configs.candidate_tiles("dkdv", 64, torch.bfloat16, hopper)


def test_tile_chooser_times_the_candidates_once_per_key_when_autotuning(monkeypatch):
    monkeypatch.setenv("FLASHATTN2_AUTOTUNE", "1")
    monkeypatch.setattr(launch_module, "KERNELS_INTERPRETED", False)
    candidates = [Tile(128, 64, 8, 3), Tile(64, 64, 4, 2), Tile(32, 32, 4, 1)]
    monkeypatch.setattr(launch_module, "candidate_tiles", lambda *args: candidates)
    timed = []

    def fake_bench(fn, **kwargs):
        fn()
        return {Tile(128, 64, 8, 3): 2.0, Tile(64, 64, 4, 2): 1.0, Tile(32, 32, 4, 1): 3.0}[timed[-1]]

    monkeypatch.setattr(launch_module.triton.testing, "do_bench", fake_bench)
    chooser = TileChooser()
    for _ in range(2):
        tile = chooser.choose(TileKey(64, torch.bfloat16, False, torch.device("cpu"), 16), timed.append, "forward")
        assert tile == Tile(64, 64, 4, 2)
    assert timed == candidates  # tuned once, on the first call of the key


def test_every_hopper_default_fits_an_h100_and_is_a_candidate():
    from flashattn2._configs import _CANDIDATES, _HOPPER_DEFAULTS

    h100_shared_memory = 227 * 1024  # per block, compute capability 9.0 (CUDA C++ Programming Guide)
    for kernel, table in _HOPPER_DEFAULTS.items():
        for (bucket, element_size), tile in table.items():
            assert shared_memory_bytes(kernel, tile, bucket, element_size) <= h100_shared_memory, (kernel, bucket)
            assert tile in _CANDIDATES[kernel], (kernel, tile)  # so that autotuning can keep it


def test_views_whose_offsets_overflow_int32_are_copied():
    # Layouts of multi-GiB tensors, without their memory.
    assert not needs_contiguous_copy((1, 2, 3, 16), (0, 16, 2**20, 1), "q")  # last row at 2 * 2**20: fine
    assert needs_contiguous_copy((1, 2, 3, 16), (0, 16, 2**30 + 64, 1), "k")  # last row past 2**31
    assert not needs_contiguous_copy((1, 1, 2**24, 128), contiguous_strides((1, 1, 2**24, 128)), "v")  # 2**31
    with pytest.raises(ValueError, match=r"v has 16777217 x 128 elements per \(batch, head\)"):
        needs_contiguous_copy((1, 1, 2**24 + 1, 128), (0, 0, 129, 1), "v")


def test_contiguous_strides_match_torch():
    for shape in ((2, 3, 5, 7), (1, 0, 4, 8), (3, 1, 1, 2)):
        assert contiguous_strides(shape) == torch.empty(shape).stride()


@pytest.mark.triton_kernels
@pytest.mark.parametrize(
    ("dtype", "max_scores", "kernels"),
    [
        (torch.bfloat16, 0, ["_dq_kernel", "_dkdv_kernel"]),
        (torch.bfloat16, 2 * 24 * 24, ["_one_launch_kernel"]),
        (torch.float32, 2 * 24 * 24, ["_dq_kernel", "_dkdv_kernel"]),
    ],
    ids=["bf16-above-bound", "bf16-up-to-bound", "fp32-up-to-bound"],
)
def test_the_first_backward_launches_each_kernel_once_without_autotuning(monkeypatch, dtype, max_scores, kernels):
    # Above ONE_LAUNCH_MAX_SCORES (batch x heads x queries x keys) the backward is two kernels, up to it one in
    # fp16 and bf16; fp32 is two kernels at every size (its one-launch kernel compiles slowly).
    import flashattn2._triton_backward as backward
    from flashattn2._triton_backward import backward_plan, triton_backward
    from flashattn2._triton_forward import triton_forward

    monkeypatch.setattr(backward, "ONE_LAUNCH_MAX_SCORES", max_scores)

    launched = []
    real_call = CompiledLaunch.__call__

    def counting_call(self, *tensors):
        launched.append(self.fn.__name__)
        return real_call(self, *tensors)

    monkeypatch.setattr(CompiledLaunch, "__call__", counting_call)
    monkeypatch.delenv("FLASHATTN2_AUTOTUNE", raising=False)
    backward_plan.cache_clear()  # a plan made by another test would skip its first call here
    q, k, v, grad_out = (torch.randn(1, 2, 24, 16, dtype=dtype) for _ in range(4))
    out, lse = triton_forward(q, k, v, True, 0.25)
    launched.clear()
    triton_backward(grad_out, q, k, v, out, lse, True, 0.25)
    assert launched == kernels
    backward_plan.cache_clear()


def test_a_first_launch_waits_for_its_background_compile(monkeypatch):
    monkeypatch.setattr(launch_module, "KERNELS_INTERPRETED", False)
    fn = _RecordingJIT()
    compiled = []

    def warmup(*args, grid, **kwargs):
        time.sleep(0.2)  # a compile that is still running when the first call comes
        compiled.append((threading.current_thread().name, grid, args, kwargs))
        fn.launches.append("compiled")

    fn.warmup = warmup
    tile = Tile(64, 32, 8, 3)
    launch = CompiledLaunch(fn, (5, 2, 1), (16, 0.5), {"BLOCK": 64, "MODE": 1}, tile, torch.device("cpu"))
    x, y = torch.randn(3), torch.randn(3)
    launch.compile_in_background(x, y)
    launch(x, y)
    [(thread, grid, args, kwargs)] = compiled
    assert thread.startswith("flashattn2-compile") and grid == (5, 2, 1) and args == (x, y, 16, 0.5)
    assert kwargs == JIT_KWARGS
    assert fn.launches[0] == "compiled" and fn.launches[1][0] == "jit"  # the launch came after the compile


def _first_launches_in_a_forked_child(launch, fn, x):
    """In a child forked while ``launch``'s background compile runs: its first call, then a new background
    compile and call. Returns the child's exit status (0: both ran)."""
    pid = os.fork()
    if pid == 0:  # the child: no test runner here, only the exit status speaks
        status = 1
        try:
            launch(x)
            again = CompiledLaunch(fn, (1, 1, 1), (), {}, Tile(16, 16, 4, 1), torch.device("cpu"))
            again.compile_in_background(x)
            again(x)
            status = 0 if ("compiled", os.getpid()) in fn.launches else 1
        finally:
            os._exit(status)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "hung"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_neither_waits_for_the_parents_compiles_nor_lacks_its_own(monkeypatch):
    # A data loader's workers, say, forked while a compile ran: the parent's worker threads do not exist in the
    # child, so a wait for their compile would never end there.
    monkeypatch.setattr(launch_module, "KERNELS_INTERPRETED", False)
    fn = _RecordingJIT()
    fn.arg_names = ("X",)

    def warmup(*args, grid, **kwargs):
        time.sleep(1.0 if os.getpid() == parent else 0.0)
        fn.launches.append(("compiled", os.getpid()))

    parent = os.getpid()
    fn.warmup = warmup
    launch = CompiledLaunch(fn, (1, 1, 1), (), {}, Tile(16, 16, 4, 1), torch.device("cpu"))
    x = torch.randn(3)
    launch.compile_in_background(x)  # still running at the fork
    assert _first_launches_in_a_forked_child(launch, fn, x) == 0
    launch(x)
    assert ("compiled", parent) in fn.launches


@pytest.mark.triton_kernels
@pytest.mark.parametrize("max_scores", [0, 2 * 24 * 24])  # the backward as two kernels, then as one launch
def test_a_forward_that_needs_gradients_compiles_its_backward_early(monkeypatch, max_scores):
    import flashattn2._triton_backward as backward
    from flashattn2._triton_backward import backward_plan
    from flashattn2._triton_forward import forward_plan

    # Under the interpreter nothing is compiled: record what would be, and let the calls run.
    monkeypatch.setattr(backward, "KERNELS_INTERPRETED", False)
    monkeypatch.setattr(backward, "ONE_LAUNCH_MAX_SCORES", max_scores)
    monkeypatch.delenv("FLASHATTN2_AUTOTUNE", raising=False)
    monkeypatch.delenv("FLASHATTN2_BACKGROUND_COMPILE", raising=False)
    early, launched = {}, {}

    def specialization(tensors):  # what Triton specializes a kernel's tensor arguments on
        return [(x.dtype, x.data_ptr() % 16 == 0) for x in tensors]

    def compile_in_background(self, *tensors):
        early[self] = specialization(tensors)

    real_call = CompiledLaunch.__call__

    def call(self, *tensors):
        launched.setdefault(self, specialization(tensors))
        return real_call(self, *tensors)

    monkeypatch.setattr(CompiledLaunch, "compile_in_background", compile_in_background)
    monkeypatch.setattr(CompiledLaunch, "__call__", call)
    forward_plan.cache_clear()
    backward_plan.cache_clear()  # plans made by other tests would skip their first calls here
    try:
        q, k, v = (torch.randn(1, 2, 24, 16, dtype=torch.bfloat16) for _ in range(3))
        FlashAttention2Triton.apply(q, k, v, True)  # no input requires grad: no backward to prepare
        assert not early
        # copies that require grad, through the forward and backward, against float64
        assert_attention_matches_reference(FlashAttention2Triton.apply, q, k, v, causal=True)
        kernels = ["_one_launch_kernel"] if max_scores else ["_dq_kernel", "_dkdv_kernel"]
        assert [launch.fn.__name__ for launch in early] == kernels
        # the backward launched the prepared kernels, with tensors of the stand-ins' dtypes and alignments
        assert [launch.fn.__name__ for launch in launched if launch in early] == kernels
        assert all(launched[launch] == standins for launch, standins in early.items())
        FlashAttention2Triton.apply(q.requires_grad_(), k, v, True)  # the same layout again: prepared once
        assert len(early) == len(kernels)
    finally:
        forward_plan.cache_clear()
        backward_plan.cache_clear()


@pytest.mark.triton_kernels
def test_an_expanded_gradient_runs_as_its_contiguous_copy(monkeypatch):
    # out.sum().backward() hands the backward an expanded gradient (strides 0). Copied, it gets the contiguous
    # gradient's plan: the same compiled kernels, and on Hopper the TMA loads that need a unit last stride.
    import flashattn2._triton_backward as backward
    from flashattn2._triton_backward import triton_backward
    from flashattn2._triton_forward import triton_forward

    q, k, v = (torch.randn(1, 2, 24, 16) for _ in range(3))
    out, lse = triton_forward(q, k, v, True, 0.25)
    expanded = torch.randn(()).expand(out.shape)
    looked_up = []
    plan_for = backward.plan_for

    def recording_plan_for(grad_out, *args):
        looked_up.append(grad_out.stride())
        return plan_for(grad_out, *args)

    monkeypatch.setattr(backward, "plan_for", recording_plan_for)
    grads = triton_backward(expanded, q, k, v, out, lse, True, 0.25)
    copied = triton_backward(expanded.contiguous(), q, k, v, out, lse, True, 0.25)
    assert looked_up == [contiguous_strides(out.shape)] * 2
    for got, want in zip(grads, copied, strict=True):
        assert torch.equal(got, want)


@pytest.fixture
def on_a_hopper_gpu(monkeypatch):
    """The Hopper kernels' modules believing they run on an H100 (132 multiprocessors) with their tested Triton;
    returns :mod:`flashattn2._hopper` (the shared conditions)."""
    import triton

    from flashattn2 import _hopper

    pytest.importorskip("flashattn2._gluon_backward")
    pytest.importorskip("flashattn2._gluon_forward")
    monkeypatch.setattr(_hopper, "KERNELS_INTERPRETED", False)
    monkeypatch.setattr(_hopper, "cuda_capability", lambda device: (9, 0))
    monkeypatch.setattr(_hopper, "TESTED_TRITON", triton.__version__)
    monkeypatch.setattr(_hopper, "_failures", {kind: [] for kind in _hopper.SWITCHES})
    monkeypatch.setattr(_hopper, "multiprocessors", lambda device: 132)
    monkeypatch.setattr(_hopper, "l2_cache_bytes", lambda device: 50 * 2**20)
    for switch in _hopper.SWITCHES.values():
        monkeypatch.delenv(switch, raising=False)
    return _hopper


@pytest.mark.parametrize(
    "q_shape, kv_heads, causal",
    [
        ((1, 2, 1000, 64), 2, True),  # persistent causal programs: the schedule table
        ((2, 4, 1000, 128), 2, False),  # grouped-query heads, non-causal: dK and dV by TMA
        ((1, 4, 1000, 256), 2, True),  # causal grouped-query heads: per-query-head workspaces and the group sum
    ],
)
def test_the_hopper_backward_compiles_ahead_with_the_first_calls_specialization(
    on_a_hopper_gpu, monkeypatch, q_shape, kv_heads, causal
):
    # Built on the CPU (no kernel runs): the stand-ins of compile_early must give every launch of the first call
    # the specialization that call gives it, or the compile ahead is wasted and the first call compiles again.
    import flashattn2._gluon_backward as hopper

    monkeypatch.setattr(on_a_hopper_gpu, "usable_multiprocessors", lambda device: 132)
    early, launched = {}, {}

    def specialization(args):  # what Triton specializes on: tensors' dtypes and alignments, descriptors' blocks
        return [
            (x.dtype, x.data_ptr() % 16 == 0)
            if isinstance(x, torch.Tensor)
            else (tuple(x.block_shape), repr(x.layout), x.base.dtype)
            for x in args
        ]

    def record(into):
        return lambda launch, *args: into.update({launch: specialization(args)})

    monkeypatch.setattr(CompiledLaunch, "compile_in_background", record(early))
    monkeypatch.setattr(CompiledLaunch, "__call__", record(launched))
    batch, heads, n, head_dim = q_shape
    kv_shape = (batch, kv_heads, n, head_dim)
    cpu, dtype = torch.device("cpu"), torch.bfloat16
    q, out, grad_out = (torch.randn(q_shape, dtype=dtype) for _ in range(3))
    k, v = (torch.randn(kv_shape, dtype=dtype) for _ in range(2))
    lse = torch.randn(batch, heads, n)
    launcher = hopper.HopperBackward(q_shape, kv_shape, out.stride(), grad_out.stride(), dtype, cpu, causal, 0.1)
    launcher.compile_early()
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    launcher(grad_out, q, k, v, out, lse, dq, dk, dv)
    assert launched and launched == early
    launcher.compile_early()  # once launched, nothing more to prepare
    assert len(early) == len(launched)


@pytest.mark.triton_kernels
@pytest.mark.parametrize("n, head_dim", [(201, 64), (70, 128)])
def test_the_hopper_backward_prologue_pads_each_query_tile_s_row_statistics(n, head_dim):
    # The Hopper backward loads a query tile's L and Delta by TMA, which must start at a 16-byte-aligned element:
    # each tile's rows start at a multiple of 2 * BLOCK_M elements of row_stats whatever N is. Rows past N give
    # P = 0 (L = +inf) and dS = 0 (Delta = 0).
    hopper = pytest.importorskip("flashattn2._gluon_backward")
    batch, heads, rows = 2, 3, hopper.block_m(head_dim)
    q_tiles, pad = triton.cdiv(n, rows), -n % rows
    out, grad_out = (torch.randn(batch, heads, n, head_dim, dtype=torch.bfloat16) for _ in range(2))
    lse = torch.randn(batch, heads, n)
    row_stats = torch.full((batch * heads * q_tiles, 2, rows), float("nan"))
    counters = torch.full((batch * heads * q_tiles + 1,), 7, dtype=torch.int32)
    hopper._prologue_kernel[(q_tiles, batch * heads)](
        out,
        grad_out,
        lse,
        row_stats,
        counters,
        *out.stride()[:3],
        *grad_out.stride()[:3],
        heads,
        n,
        q_tiles,
        HEAD_DIM=head_dim,
        BLOCK_M=rows,
    )
    lse2 = torch.nn.functional.pad(lse * LOG2_E, (0, pad), value=float("inf"))
    delta = torch.nn.functional.pad((out.double() * grad_out.double()).sum(-1), (0, pad))
    torch.testing.assert_close(row_stats[:, 0], lse2.view(-1, rows))
    torch.testing.assert_close(row_stats[:, 1].double(), delta.view(-1, rows), rtol=1e-5, atol=1e-5)
    assert not counters.any()  # each tile's counter and the ticket zeroed


def test_hopper_backward_applies_only_where_it_was_measured(on_a_hopper_gpu, monkeypatch):
    import flashattn2._gluon_backward as hopper

    shared = on_a_hopper_gpu
    cuda = torch.device("cuda", 0)

    def applies(shape=(1, 16, 16384, 64), k_shape=None, strides=None, dtype=torch.bfloat16, device=cuda, causal=True):
        strides = strides or (contiguous_strides(shape),) * 4
        return hopper.hopper_backward_applies(shape, k_shape or shape, strides, dtype, device, causal, True)

    assert applies()
    assert applies(causal=False)  # 128 key tiles: one per multiprocessor
    assert applies(shape=(1, 16, 32768, 64))  # causal: every wait is on a program that started earlier
    assert not applies(shape=(1, 16, 32768, 64), causal=False)  # 256 key tiles cannot all be resident
    monkeypatch.setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "50")  # an MPS client with 66 multiprocessors
    assert not applies(causal=False)
    assert applies(shape=(1, 16, 8192, 64), causal=False)
    assert applies()
    monkeypatch.delenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
    assert applies(k_shape=(1, 4, 16384, 64))  # grouped-query heads
    assert not applies(k_shape=(1, 16, 16000, 64))  # Nq != Nk
    assert applies(shape=(4, 16, 4096, 128), causal=False)
    assert applies(shape=(2, 32, 4096, 128), k_shape=(2, 8, 4096, 128))
    assert applies(shape=(8, 16, 2048, 128))  # head dim 128: from 2048 keys
    assert applies(shape=(16, 16, 1024, 128))  # and from 1024 with 2**28 scores
    assert not applies(shape=(12, 16, 1024, 128))  # 2**27.6 scores
    assert not applies(shape=(256, 16, 512, 128))
    assert not applies(shape=(1, 16, 16384, 96))  # head dims the kernel is not laid out for
    assert applies(shape=(1, 16, 16384, 256))  # head dim 256: 64-key tiles
    assert applies(shape=(1, 16, 8192, 256), causal=False)  # 128 key tiles
    assert not applies(shape=(1, 16, 16384, 256), causal=False)  # 256 key tiles
    assert applies(shape=(4, 16, 512, 256))  # from 512 keys with 2**24 scores
    assert applies(shape=(1, 16, 1024, 256), causal=False)
    assert not applies(shape=(2, 16, 512, 256))  # 2**23 scores: fewer than measured
    assert not applies(shape=(1024, 4, 256, 256))  # 256 keys
    assert not applies(dtype=torch.float32)
    assert applies(shape=(16, 16, 2048, 64))  # head dim 64: from 2048 keys too
    assert applies(shape=(16, 16, 2049, 64)) and applies(shape=(2, 16, 4099, 128))  # lengths not multiples of 4
    assert applies(shape=(1, 16, 2048, 64))  # 2**26 scores
    assert not applies(shape=(1, 8, 2048, 64))  # 2**25 scores: fewer than measured
    assert applies(shape=(16, 16, 1024, 64))  # from 1024 keys with 2**28 scores
    assert not applies(shape=(8, 16, 1024, 64))  # 2**27 scores
    assert applies(shape=(128, 16, 512, 64))  # from 512 keys with 2**29 scores
    assert not applies(shape=(64, 16, 512, 64))
    assert not applies(shape=(1024, 16, 256, 64))  # 2**30 scores, 256 keys
    assert applies(shape=(16, 16, 512, 64), causal=False)  # non-causal: from 512 keys
    assert applies(shape=(8, 16, 512, 64), causal=False)  # with 2**25 scores
    assert not applies(shape=(4, 16, 512, 64), causal=False)  # 2**24 scores
    assert applies(shape=(1, 16, 1024, 64), causal=False)  # from 1024 keys with 2**24
    assert not applies(shape=(1, 8, 1024, 64), causal=False)  # 2**23 scores
    assert applies(shape=(4, 16, 1024, 128), causal=False)
    assert applies(shape=(4, 16, 512, 128), causal=False)  # head dim 128: from 512 keys with 2**24 scores
    assert not applies(shape=(2, 16, 512, 128), causal=False)  # 2**23 scores
    assert not applies(shape=(64, 16, 256, 64), causal=False)  # 2**26 scores, 256 keys
    assert not applies(device=torch.device("cpu"))
    packed = (16384 * 3 * 16 * 64, 64, 3 * 16 * 64, 1)  # a view of a packed QKV projection: TMA takes it
    assert applies(strides=(packed,) * 4)
    assert not applies(strides=((16384 * 16 * 65, 65, 16 * 65, 1),) * 4)  # rows of 130 bytes: not 16-byte strides
    assert not applies(strides=((16384 * 16 * 64, 16384 * 64, 1, 16384),) * 4)  # head dim not contiguous
    assert not hopper.hopper_backward_applies(
        (1, 16, 16384, 64),
        (1, 16, 16384, 64),
        (contiguous_strides((1, 16, 16384, 64)),) * 4,
        torch.bfloat16,
        cuda,
        True,
        (True, False, True, True, True),
    )
    monkeypatch.setattr(shared, "cuda_capability", lambda device: (10, 0))
    assert not applies()
    monkeypatch.setattr(shared, "cuda_capability", lambda device: (9, 0))
    monkeypatch.setenv("FLASHATTN2_HOPPER_BACKWARD", "0")
    assert not applies()
    monkeypatch.delenv("FLASHATTN2_HOPPER_BACKWARD")
    monkeypatch.setattr(shared, "TESTED_TRITON", "2.0.")
    assert not applies()


# torch 2.11 requires Triton 3.6, 2.12 3.7.0, 2.13 3.7.1, 2.14 3.8 and 2.15 3.9; 3.10 is not out
@pytest.mark.parametrize(
    "version, runs",
    [("3.6.0", True), ("3.7.1", True), ("3.8.0", True), ("3.9.0", True), ("3.5.1", False), ("3.10.0", False)],
)
def test_the_hopper_kernels_run_only_with_the_tritons_they_were_measured_with(monkeypatch, version, runs):
    from flashattn2 import _hopper

    monkeypatch.setattr(_hopper, "KERNELS_INTERPRETED", False)
    monkeypatch.setattr(_hopper, "cuda_capability", lambda device: (9, 0))
    monkeypatch.setattr(triton, "__version__", version)
    shape = (1, 16, 16384, 64)
    strides = (contiguous_strides(shape),) * 3
    cuda = torch.device("cuda", 0)
    assert _hopper.layout_supported("forward", shape, shape, strides, torch.bfloat16, cuda, True) == runs


class _FailingHopperKernel:
    def __init__(self, launched):
        self.launched = launched
        self.calls = 0

    def __call__(self, *tensors):
        self.calls += 1
        raise RuntimeError("PassManager::run failed")


@pytest.mark.triton_kernels
def test_a_hopper_backward_that_fails_on_its_first_call_falls_back_to_the_triton_kernels(on_a_hopper_gpu):
    import flashattn2._triton_backward as backward
    from flashattn2._triton_forward import triton_forward

    q, k, v, grad_out = (torch.randn(1, 2, 24, 16) for _ in range(4))
    out, lse = triton_forward(q, k, v, True, 0.25)
    backward.backward_plan.cache_clear()
    expected = backward.triton_backward(grad_out, q, k, v, out, lse, True, 0.25)
    plan = backward.plan_for(grad_out, q, k, v, out, True, 0.25)
    plan.hopper = failing = _FailingHopperKernel(launched=False)
    with pytest.warns(RuntimeWarning, match="the Hopper backward kernel failed .*RuntimeError: PassManager"):
        got = backward.triton_backward(grad_out, q, k, v, out, lse, True, 0.25)
    assert all(torch.equal(a, b) for a, b in zip(got, expected))
    assert failing.calls == 1 and plan.hopper is None
    assert on_a_hopper_gpu._failures["backward"]  # no other plan of this process tries it
    assert not on_a_hopper_gpu._failures["forward"]
    cuda = torch.device("cuda", 0)
    shape = (1, 16, 16384, 64)
    from flashattn2._gluon_backward import hopper_backward_applies

    assert not hopper_backward_applies(shape, shape, (contiguous_strides(shape),) * 4, torch.bfloat16, cuda, True, True)
    # A kernel that has run before and fails now is an error to report, not to hide.
    plan.hopper = _FailingHopperKernel(launched=True)
    with pytest.raises(RuntimeError, match="PassManager"):
        backward.triton_backward(grad_out, q, k, v, out, lse, True, 0.25)
    backward.backward_plan.cache_clear()


def test_hopper_forward_applies_only_where_it_was_measured(on_a_hopper_gpu, monkeypatch):
    import flashattn2._gluon_forward as hopper

    cuda = torch.device("cuda", 0)

    def applies(shape=(1, 16, 16384, 64), k_shape=None, strides=None, dtype=torch.bfloat16, causal=True):
        strides = strides or (contiguous_strides(shape),) * 3
        return hopper.hopper_forward_applies(shape, k_shape or shape, strides, dtype, cuda, causal, True)

    assert applies()
    assert applies(causal=False)
    assert applies(shape=(2, 16, 4096, 64))  # head dim 64: causal from 2048 keys, non-causal from 1024
    assert applies(shape=(1, 8, 2048, 64))
    assert applies(shape=(16, 16, 1024, 64))  # causal from 512 keys with 2**28 scores
    assert applies(shape=(64, 16, 512, 64))
    assert not applies(shape=(8, 16, 1024, 64))  # 2**27 scores
    assert not applies(shape=(32, 16, 512, 64))
    assert applies(shape=(8, 16, 2048, 64), causal=False)
    assert applies(shape=(8, 16, 1024, 64), causal=False)
    assert not applies(shape=(8, 16, 512, 64), causal=False)
    assert applies(shape=(4, 16, 4096, 128))
    assert applies(shape=(4, 16, 4096, 128), causal=False)
    assert applies(shape=(8, 16, 512, 128))  # head dim 128: from 512 keys
    assert applies(shape=(8, 16, 512, 128), causal=False)
    assert not applies(shape=(8, 16, 256, 128))
    assert applies(shape=(2, 32, 4096, 128), k_shape=(2, 8, 4096, 128))  # grouped-query heads
    assert applies(shape=(1, 16, 16384, 256))  # head dim 256: causal from 512 keys, non-causal from 2048
    assert applies(shape=(4, 8, 512, 256))
    assert not applies(shape=(4, 8, 256, 256))
    assert applies(shape=(4, 16, 2048, 256), causal=False)
    assert not applies(shape=(8, 16, 1024, 256), causal=False)
    assert not applies(shape=(1, 16, 16384, 96))
    assert not applies(dtype=torch.float32)
    assert not applies(k_shape=(1, 16, 16000, 64))  # Nq != Nk
    assert not applies(shape=(1, 65536, 4096, 128))  # B * H * N * D past 32-bit offsets
    assert not applies(strides=((16384 * 16 * 65, 65, 16 * 65, 1),) * 3)
    monkeypatch.setenv("FLASHATTN2_HOPPER_FORWARD", "0")
    assert not applies()


@pytest.mark.triton_kernels
def test_a_hopper_forward_that_fails_on_its_first_call_falls_back_to_the_triton_kernel(on_a_hopper_gpu):
    import flashattn2._triton_forward as forward

    q, k, v = (torch.randn(1, 2, 24, 16) for _ in range(3))
    forward.forward_plan.cache_clear()
    expected = forward.triton_forward(q, k, v, True, 0.25)
    layout = (q.shape, q.stride(), k.shape, k.stride(), v.stride(), q.dtype, q.device)
    plan = forward.forward_plan(*layout, True, 0.25, True)
    plan.hopper = failing = _FailingHopperKernel(launched=False)
    with pytest.warns(RuntimeWarning, match="the Hopper forward kernel failed .*RuntimeError: PassManager"):
        got = plan(q, k, v)
    assert all(torch.equal(a, b) for a, b in zip(got, expected))
    assert failing.calls == 1 and plan.hopper is None
    assert on_a_hopper_gpu._failures["forward"] and not on_a_hopper_gpu._failures["backward"]
    plan.hopper = _FailingHopperKernel(launched=True)
    with pytest.raises(RuntimeError, match="PassManager"):
        plan(q, k, v)
    forward.forward_plan.cache_clear()


def test_the_hopper_backward_programs_by_mask_and_grouped_heads(on_a_hopper_gpu, monkeypatch):
    from flashattn2._gluon_backward import HopperBackward

    q_shape, k_shape = (2, 32, 4096, 128), (2, 8, 4096, 128)
    strides = contiguous_strides(q_shape)

    def backward(k_shape, causal):
        device = torch.device("cuda", 0)  # not touched: the fixture gives it 132 multiprocessors
        return HopperBackward(q_shape, k_shape, strides, strides, torch.bfloat16, device, causal, 0.1)

    key_tiles = 4096 // 128
    # Causal at head dim 128: a program per item (a key tile of one query head with grouped heads).
    causal = backward(k_shape, True)
    assert causal.per_query_head and causal.items == key_tiles * 2 * 32 and causal.grid == (causal.items,)
    assert causal.schedule_table is None
    # Non-causal walks are equally long: a work item per (key tile, k/v head), taken in turn by persistent
    # programs, one per multiprocessor (or per multiprocessor of an MPS client's share).
    full = backward(k_shape, False)
    assert not full.per_query_head and full.items == key_tiles * 2 * 8 and full.grid == (132,)
    monkeypatch.setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25")
    assert backward(k_shape, False).grid == (33,)
    assert not backward(q_shape, True).per_query_head


def _dealt_lists(table, items, programs, dealing_rank=None):
    """Each program's items from a table of ``_hopper.deal_in_order``, after checking that the table deals every
    item once and that each program's items follow the dealing order (``dealing_rank(item)`` increasing; by
    default the item numbers)."""
    offsets, dealt = table[: programs + 1], table[programs + 1 :]
    assert offsets[0] == programs + 1 and offsets[-1] == len(table)
    assert sorted(dealt) == list(range(items))
    lists = [table[a:b] for a, b in itertools.pairwise(offsets)]
    assert all(mine == sorted(mine, key=dealing_rank) for mine in lists)
    return lists


def _interleaved_rank(tiles):
    """The causal backward's interleaved dealing order of items with ``tiles`` key tiles per (batch, head) pair:
    by key tile descending (item i is key tile ``tiles - 1 - i % tiles``), every pair's together."""
    return lambda item: (item % tiles, item // tiles)


def _starts_interleaved(lists, tiles, pairs):
    """Whether the first items dealt (to the first ``pairs`` programs) are every pair's last key tile, the shortest
    walks, as interleaved dealing deals them."""
    return [mine[0] for mine in lists[:pairs]] == [pair * tiles for pair in range(pairs)]


def test_causal_hopper_backward_programs_at_head_dim_64_are_persistent(on_a_hopper_gpu):
    from flashattn2._gluon_backward import HopperBackward

    q_shape = (2, 32, 4096, 64)
    strides = contiguous_strides(q_shape)
    device = torch.device("cuda", 0)  # not touched: the fixture gives it 132 multiprocessors
    causal = HopperBackward(q_shape, q_shape, strides, strides, torch.bfloat16, device, True, 0.1)
    tiles = 4096 // 128  # key tiles and query tiles (128 rows at head dim 64)
    assert causal.items == tiles * 2 * 32 and causal.grid == (132,)
    # The items are dealt on the host: each once, each program's in item order (by (batch, head), key tile
    # descending: item i walks 32 - (31 - i % 32) query tiles), and no program's work (one more per item) more
    # than 8% above the mean: the last items dealt are the longest walks of the last head.
    programs = _dealt_lists(causal.schedule_table, causal.items, 132)
    work = [sum(tiles - (tiles - 1 - i % tiles) + 1 for i in mine) for mine in programs]
    assert max(work) <= 1.08 * sum(work) / len(work)


@pytest.mark.parametrize(
    "q_shape, larger", [((1, 16, 2048, 64), (3, 16, 2048, 64)), ((2, 8, 4096, 64), (3, 8, 4096, 64))]
)
def test_causal_hopper_backward_interleaves_heads_whose_reread_data_fit_in_l2(on_a_hopper_gpu, q_shape, larger):
    from flashattn2._gluon_backward import HopperBackward, causal_backward_schedule

    # Q, dO and the fp32 dQ workspace of every (batch, head): 16 or 32 MiB, within 3/4 of the 50 MiB of L2 the
    # fixture gives the device: every pair's items of one key tile are dealt together, the last key tile's first
    strides = contiguous_strides(q_shape)
    device = torch.device("cuda", 0)
    causal = HopperBackward(q_shape, q_shape, strides, strides, torch.bfloat16, device, True, 0.1)
    tiles = q_shape[2] // 128
    assert causal.items == tiles * q_shape[0] * q_shape[1]
    programs = _dealt_lists(causal.schedule_table, causal.items, 132, dealing_rank=_interleaved_rank(tiles))
    assert _starts_interleaved(programs, tiles, pairs=q_shape[0] * q_shape[1])

    def busiest(lists):  # the most work a program has: item i walks 1 + i % tiles query tiles, plus one
        return max(sum(i % tiles + 2 for i in mine) for mine in lists)

    by_pair = causal_backward_schedule(causal.items, tiles, tiles, 1, 132, interleaved=False)
    assert busiest(programs) < busiest(_dealt_lists(by_pair, causal.items, 132))
    # 48 MiB, more than 3/4 of L2: by (batch, head), as the items are numbered
    strides = contiguous_strides(larger)
    larger_plan = HopperBackward(larger, larger, strides, strides, torch.bfloat16, device, True, 0.1)
    _dealt_lists(larger_plan.schedule_table, larger_plan.items, 132)


@pytest.mark.parametrize(
    "q_shape, dealt",
    [
        ((1, 16, 2048, 128), "interleaved"),  # 32 MiB re-read, 256 items
        ((1, 8, 4096, 128), "interleaved"),
        ((1, 8, 2048, 256), "interleaved"),  # 64-key items: 256
        ((2, 16, 1024, 128), "one per program"),  # 1024 keys
        ((1, 8, 2048, 128), "one per program"),  # 128 items, no more than the 132 programs
        ((2, 16, 2048, 128), "one per program"),  # 64 MiB re-read, more than 3/4 of L2
        ((1, 8, 2048, 64), "by pair"),  # head dim 64: persistent everywhere, 128 items
        ((2, 16, 1024, 64), "by pair"),
    ],
)
def test_causal_hopper_backward_programs_are_persistent_where_their_items_are_dealt_interleaved(
    on_a_hopper_gpu, q_shape, dealt
):
    from flashattn2._gluon_backward import HopperBackward, block_n

    strides = contiguous_strides(q_shape)
    device = torch.device("cuda", 0)  # not touched: the fixture gives it 132 multiprocessors and 50 MiB of L2
    causal = HopperBackward(q_shape, q_shape, strides, strides, torch.bfloat16, device, True, 0.1)
    tiles = q_shape[2] // block_n(q_shape[3])
    assert causal.items == tiles * q_shape[0] * q_shape[1]
    if dealt == "one per program":
        assert causal.grid == (causal.items,) and causal.schedule_table is None
        return
    assert causal.grid == (min(causal.items, 132),)
    rank = _interleaved_rank(tiles) if dealt == "interleaved" else None  # the order they are dealt in
    programs = _dealt_lists(causal.schedule_table, causal.items, causal.grid[0], dealing_rank=rank)
    assert _starts_interleaved(programs, tiles, pairs=q_shape[0] * q_shape[1]) == (dealt == "interleaved")


@pytest.mark.parametrize("causal", [True, False])
def test_only_causal_triton_launches_interleave_pairs(on_a_hopper_gpu, causal):
    # Where all pairs' K and V fit in L2, causal Triton launches interleave every (batch, head) pair; launches
    # without the mask get 1, which their kernels never read (an unused integer still splits Triton's
    # specializations).
    from flashattn2._triton_backward import BackwardPlan
    from flashattn2._triton_forward import ForwardPlan

    device = torch.device("cuda", 0)  # not touched: the fixture gives it 50 MiB of L2
    shape = (2, 4, 256, 64)  # 2 MiB of K and V, below the thresholds of the Hopper kernels
    stride = contiguous_strides(shape)
    forward = ForwardPlan(shape, stride, shape, stride, stride, torch.bfloat16, device, causal, 0.1, True)
    backward = BackwardPlan(
        shape, stride, shape, stride, stride, stride, stride, torch.bfloat16, device, causal, 0.1, True
    )
    pairs = 8 if causal else 1
    assert forward.hopper is None and backward.hopper is None
    assert (forward.scalars[-1], backward.dq_scalars[-1], backward.dkdv_scalars[-1]) == (pairs, pairs, pairs)


def test_the_causal_hopper_forward_orders_all_pairs_heaviest_first_where_their_keys_fit_in_l2(on_a_hopper_gpu):
    from flashattn2._gluon_forward import CAUSAL_HEAD_GROUP, HopperForward, causal_schedule

    def forward(q_shape, kv_heads):
        device = torch.device("cuda", 0)  # not touched: the fixture gives it 132 multiprocessors and 50 MiB of L2
        k_shape = (q_shape[0], kv_heads, *q_shape[2:])
        return HopperForward(q_shape, k_shape, torch.bfloat16, device, True, 0.1)

    # K and V of 8 to 24 MiB, within half of L2: one group of every pair, so the launch order runs every pair's
    # heaviest query tile first; 32 MiB: groups of CAUSAL_HEAD_GROUP pairs
    assert forward((1, 16, 2048, 64), 16).head_group == 16
    assert forward((2, 16, 1024, 128), 16).head_group == 32
    assert forward((1, 32, 4096, 64), 8).head_group == 32  # grouped-query heads: 8 MiB of K and V
    assert forward((3, 16, 2048, 64), 16).head_group == 48
    assert forward((4, 16, 2048, 64), 16).head_group == CAUSAL_HEAD_GROUP
    assert forward((8, 16, 2048, 64), 8).head_group == CAUSAL_HEAD_GROUP
    small = forward((1, 16, 2048, 64), 16)
    tiles = 2048 // 128

    def busiest(table):  # item i of one group of 16 pairs visits tiles - i // 16 key tiles, plus one
        return max(sum(tiles - i // 16 + 1 for i in mine) for mine in _dealt_lists(table, small.items, 132))

    assert busiest(small.schedule_table) < busiest(causal_schedule(small.items, tiles, 132, CAUSAL_HEAD_GROUP))


def test_the_head_dim_64_hopper_forward_runs_three_consumers_on_long_sequences(on_a_hopper_gpu):
    from flashattn2._gluon_forward import HopperForward, causal_schedule

    def forward(q_shape, causal=True, kv_heads=None):
        device = torch.device("cuda", 0)  # not touched: the fixture gives it 132 multiprocessors
        k_shape = (q_shape[0], kv_heads or q_shape[1], *q_shape[2:])
        return HopperForward(q_shape, k_shape, torch.bfloat16, device, causal, 0.1)

    # where they were measured faster than two: causal from 5000 keys, non-causal from 1536; only at head dim 64
    three = forward((1, 16, 16384, 64))
    assert three.three_consumers and three.items == 86 * 16  # ceil(16384 / 192) items of 192 rows a head
    assert forward((1, 8, 8192, 64), kv_heads=2).three_consumers and forward((2, 5, 5000, 64)).three_consumers
    assert not forward((4, 16, 4096, 64)).three_consumers and forward((4, 16, 4096, 64)).items == 4 * 16 * 32
    assert forward((16, 16, 1536, 64), causal=False).three_consumers
    assert not forward((16, 16, 1024, 64), causal=False).three_consumers
    assert not forward((1, 16, 16384, 128)).three_consumers
    assert (three.kernel.constexprs["THREE_CONSUMERS"], three.kernel.tile.block_m) == (True, 192)
    # Causal items of 192 rows over 128-key tiles, four pairs at a time heaviest first: item i is query tile
    # t = 85 - (i % (4 * 86)) // 4, which visits ceil(192 (t + 1) / 128) key tiles, the last (rows 16320-16511 of
    # 16384) all 128. Each program's work (its items' key tiles, plus one each) is within 2% of the mean.
    assert three.head_group == 4
    lists = _dealt_lists(three.schedule_table, three.items, 132)
    tiles = [min(-(-192 * (86 - (i % (4 * 86)) // 4) // 128), 128) for i in range(three.items)]
    work = [sum(tiles[i] + 1 for i in mine) for mine in lists]
    assert max(work) <= 1.02 * sum(work) / len(work)
    assert three.schedule_table == causal_schedule(three.items, 86, 132, 4, 192, 16384)


def _compiled_offline(tmp_path, shape, which: str) -> list[dict]:
    """The rows of ``benchmarks/offline_compile.py`` for one ``shape`` ([[B, H, N, D], k/v heads, causal]) and
    ``which`` kernels (``--forward-only`` or ``--backward-only``), compiled for sm_90a in a process without Triton's
    interpreter (under which Gluon kernels do not compile); their PTX is kept in ``tmp_path``."""
    script = pathlib.Path(__file__).parents[1] / "benchmarks" / "offline_compile.py"
    env = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    command = [sys.executable, str(script), "--shapes", json.dumps([shape]), which, "--dump", str(tmp_path)]
    subprocess.run([*command, "--out", str(tmp_path / "rows.json")], env=env, check=True, timeout=600)
    return json.loads((tmp_path / "rows.json").read_text())["rows"]


def test_the_three_consumer_forward_compiles_without_serialized_products(tmp_path):
    # The forward compiled for sm_90a on this machine by benchmarks/offline_compile.py. Its three consumers are
    # partitions of their own, two of them workers; ptxas serializes every warpgroup product of such a kernel
    # (C7512) if a product is in flight across a loop's back edge (NOTES v175), so each step waits for its P V
    # before the loop goes round.
    shape = [[1, 1, 1536, 64], 1, False]  # non-causal: three consumers from 1536 keys
    (row,) = _compiled_offline(tmp_path, shape, "--forward-only")
    assert row["three_consumers"] and "error" not in row
    assert not [line for line in row["ptxas"] if "C75" in line]
    assert "0 bytes spill stores" in " ".join(row["ptxas"])
    ptx = next(tmp_path.glob("*_hopper_forward_kernel.ptx")).read_text()
    # two consumers are worker partitions at 144 registers a thread (the third is the default partition)
    assert len(re.findall(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+144;", ptx)) == 2


def test_the_head_dim_64_backward_takes_its_operands_from_registers_where_ptxas_keeps_them(tmp_path):
    # The non-causal head-dim-64 backward compiled for sm_90a by benchmarks/offline_compile.py. With
    # REGISTER_OPERANDS (Triton 3.6-3.8) each consumer takes S^T's, dP^T's, dV's and dK's first operand from
    # registers and only dQ's from shared memory; otherwise dV's alone. Where the running release keeps them, the
    # kernel spills no more than 3.6's 32 bytes a thread; 3.9's ptxas would spill 144-168 (NOTES v170).
    from flashattn2._gluon_backward import REGISTER_OPERANDS

    rows = _compiled_offline(tmp_path, [[1, 1, 1024, 64], 1, False], "--backward-only")
    (row,) = [row for row in rows if row["kernel"] == "_hopper_backward_kernel"]
    assert "error" not in row and not [line for line in row["ptxas"] if "C75" in line]  # no serialized products
    assert int(re.search(r"STACK:(\d+)", row["cubin"]).group(1)) <= 32
    ptx = next(tmp_path.glob("*_hopper_backward_kernel.ptx")).read_text()
    products = re.findall(r"wgmma\.mma_async\S* \{[^}]*\}, (\S)", ptx)  # "{": A from registers
    # two consumers x two 64-query parts x four k-steps of 16 per product; dQ: two consumers x eight k-steps
    assert len(products) == 5 * 16
    assert products.count("{") == (4 if REGISTER_OPERANDS else 1) * 16


def test_the_causal_head_dim_64_backward_steps_off_the_diagonal_without_the_mask(tmp_path):
    # The causal head-dim-64 backward compiled for sm_90a by benchmarks/offline_compile.py: each item's diagonal
    # step is compiled apart from its other steps, which carry no mask. From CAUSAL_DS_T_IN_REGISTERS_MIN_KEYS
    # (8192) keys those take dK's first operand dS^T from registers too (with REGISTER_OPERANDS, Triton 3.6-3.8);
    # with fewer keys the spilled registers cost more than that gains (NOTES v180). Each consumer fences its dS
    # stores once per step, then issues the products that read them from shared memory (v183, v184), but on the
    # long walks' diagonal, where dK's product reads each 64-query part's dS^T after the part's own fence.
    from flashattn2._gluon_backward import REGISTER_OPERANDS

    for n in (4096, 8192):
        folder = tmp_path / str(n)
        rows = _compiled_offline(folder, [[1, 1, n, 64], 1, True], "--backward-only")
        (row,) = [row for row in rows if row["kernel"] == "_hopper_backward_kernel"]
        assert "error" not in row and not [line for line in row["ptxas"] if "C75" in line]  # no serialized products
        ptx = next(folder.glob("*_hopper_backward_kernel.ptx")).read_text()
        products = re.findall(r"wgmma\.mma_async\S* \{[^}]*\}, (\S)", ptx)  # "{": A from registers
        # two step bodies (the diagonal's and the others'), each 5 x 16 products as in the non-causal test above
        assert len(products) == 2 * 5 * 16
        # per body S^T, dP^T and dV from registers (with REGISTER_OPERANDS, else dV alone), and dK off the diagonal
        registers_off_diagonal = 4 if REGISTER_OPERANDS and n >= 8192 else (3 if REGISTER_OPERANDS else 1)
        assert products.count("{") == ((3 if REGISTER_OPERANDS else 1) + registers_off_diagonal) * 16
        diagonal = 2 if REGISTER_OPERANDS and n >= 8192 else 1  # fences per consumer in the diagonal's step
        # two consumers' steps on and off the diagonal, and three fences outside them: after the barriers'
        # initialization, and one in each of the two dQ writers
        assert ptx.count("fence.proxy.async.shared::cta") == 2 * (diagonal + 1) + 3


def test_the_hopper_forward_programs_by_mask_and_head_dim(on_a_hopper_gpu, monkeypatch):
    from flashattn2._gluon_forward import HopperForward

    def forward(head_dim, causal):
        device = torch.device("cuda", 0)  # not touched: the fixture gives it 132 multiprocessors
        return HopperForward((2, 32, 4096, head_dim), (2, 8, 4096, head_dim), torch.bfloat16, device, causal, 0.1)

    query_tiles = 4096 // 128
    items = query_tiles * 2 * 32
    # Up to head dim 128 persistent programs, one per multiprocessor (or per multiprocessor of an MPS client's
    # share), take the items in turn. At 256, where two Q buffers do not fit beside the K/V ring, each program
    # takes one item, causal ones the heaviest first.
    for causal in (False, True):
        assert forward(64, causal).grid == forward(128, causal).grid == (132,)
        assert forward(256, causal).items == items and forward(256, causal).grid == (items,)
    assert forward(128, False).schedule_table is None and forward(256, True).schedule_table is None
    causal = forward(128, True)
    # The causal items are dealt on the host: each once, each program's in the launch order (query tile 31 of
    # four (batch, head) pairs, then 30, ...: item i of a group of four pairs visits 32 - (i % 128) // 4 key
    # tiles), and no program's work more than 2% above the mean.
    programs = _dealt_lists(causal.schedule_table, items, 132)
    work = [sum(query_tiles - (i % (4 * query_tiles)) // 4 for i in mine) for mine in programs]
    assert max(work) <= 1.02 * sum(work) / len(work)
    monkeypatch.setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25")
    assert forward(128, False).grid == forward(64, True).grid == (33,)
