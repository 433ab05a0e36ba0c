"""Launching the Triton kernels with little host time, and choosing their tiles.

A launcher (``triton_forward``, ``triton_backward``) looks up a *plan* for its
inputs' layout: shapes, strides, dtype, device, mask, scale and the 16-byte
alignment of each input pointer (``functools.lru_cache``, :data:`PLAN_CACHE_SIZE`
layouts). A plan holds what depends on nothing else: the tile, the grid, the
scalar arguments, and for each kernel a :class:`CompiledLaunch`. A call then
only allocates its outputs and launches with its tensors.

:class:`CompiledLaunch` launches a ``@triton.jit`` (or ``@gluon.jit``) function with fixed scalar
arguments and constexprs. Its first call goes through Triton's JIT
(``fn[grid](...)``), which compiles the kernel or finds it in Triton's cache and
launches it; later calls launch that compiled kernel directly. Going through
``JITFunction.run`` on every call (binding ~40 arguments, asking Triton's
specializer about each, building a cache key) cost about 75 µs of host time per
launch on the H100 machine (Triton 3.6, cProfile), more than a short
sequence's kernel takes on the GPU. The direct launch is valid for every call
of a plan because a plan's key holds everything Triton specializes a kernel on:
integer arguments (shapes and strides) and tensor dtypes and alignments (a TMA
descriptor's block shape and layout are fixed by the launcher that builds it).
Where Triton's CUDA launcher is one whose convention has been checked
(:data:`DIRECT_LAUNCH_CONVENTIONS`), a launch calls its C launch function
itself, skipping the launcher's Python ``__call__`` (about 3 µs per launch on
the H100 machine's host; ``benchmarks/NOTES.md``, v110), and a kernel's TMA
descriptors reach it expanded once per data pointer (:class:`DescriptorExpansion`;
v113) instead of encoded again on every launch.

:meth:`CompiledLaunch.compile_in_background` compiles a launch's kernel on a
worker thread ahead of its first call (the backward's kernels while the forward
runs, see :func:`flashattn2._triton_backward.compile_backward_early`); that first
call waits for the compile and finds the kernel in Triton's cache.

:func:`causal_head_group` chooses how many (batch, head) pairs a causal launch
interleaves, heaviest tiles first: all of them where what they read again
stays in L2.

:class:`TileChooser` picks a plan's tile: the shipped default of
:mod:`flashattn2._configs`, or with ``FLASHATTN2_AUTOTUNE=1`` the fastest
candidate timed on the first call's own inputs.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from typing import NamedTuple

import torch
import triton

from flashattn2._configs import Tile, TileKey, autotuning, candidate_tiles, default_tile
from flashattn2._hopper import fits_in_l2
from flashattn2._triton_common import KERNELS_INTERPRETED, contiguous_strides

# Layouts whose plans are kept (least recently used dropped first). A plan is a
# few hundred bytes; the bound keeps a process that sees ever new lengths (a
# growing KV cache, say) from growing without limit.
PLAN_CACHE_SIZE = 4096

# Worker threads for compiles ahead of a kernel's first call: two, so that the backward's dQ and dK/dV kernels
# compile side by side. Compiles in threads overlap: two took 0.6-0.7x their serial time (benchmarks/NOTES.md,
# v102; ptxas runs as a separate process). (process id, executor), made on first use in each process: a child
# forked from this one (a data loader's worker, say) has none of its threads.
_compiler: tuple[int, ThreadPoolExecutor] | None = None


def _compile_threads() -> ThreadPoolExecutor:
    global _compiler
    if _compiler is None or _compiler[0] != os.getpid():
        _compiler = (os.getpid(), ThreadPoolExecutor(max_workers=2, thread_name_prefix="flashattn2-compile"))
    return _compiler[1]


def background_compiles_enabled() -> bool:
    """Whether kernels may be compiled ahead of their first call (``FLASHATTN2_BACKGROUND_COMPILE=0`` turns it
    off: each kernel then compiles on its first call, on the calling thread)."""
    return os.environ.get("FLASHATTN2_BACKGROUND_COMPILE", "1") != "0"


def on_its_device(run: Callable, device: torch.device, *args):
    """``run(*args)`` with ``device`` current: Triton launches on the current CUDA device.
    (A CPU device, under Triton's interpreter, has no index. A CUDA device's tensors exist,
    so PyTorch's CUDA state is initialized: the current device is read without
    ``torch.cuda.current_device()``'s initialization check.)"""
    if device.index is None or device.index == torch._C._cuda_getDevice():
        return run(*args)
    with torch.cuda.device(device):
        return run(*args)


def allocator(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Callable[[], torch.Tensor]:
    """``allocator(shape, dtype, device)()``: a new contiguous tensor, for a plan that allocates the same on every
    call. It calls ``torch.empty_strided`` with the strides worked out once: that binding has one signature for
    PyTorch's argument parser to match, ``torch.empty``'s several (4.6 against 6.7 µs of host time per call on the
    H100 machine's host; ``benchmarks/NOTES.md``, v110)."""
    return functools.partial(torch.empty_strided, tuple(shape), contiguous_strides(shape), dtype=dtype, device=device)


def alignments(*tensors: torch.Tensor) -> bool | tuple[bool, ...]:
    """The 16-byte alignment of each tensor's data pointer (Triton specializes kernels on it),
    as a plan key: ``True`` when every pointer is aligned (one test for the usual case),
    else one bool per tensor."""
    combined = 0
    for x in tensors:
        combined |= x.data_ptr()
    return combined % 16 == 0 or tuple(x.data_ptr() % 16 == 0 for x in tensors)


# Triton versions whose CUDA launcher (``CudaLauncher.__call__``, triton/backends/nvidia/driver.py) only allocates
# scratch memory and then calls its C launch function, and how that function takes the kernel's arguments. A kernel
# that takes TMA descriptors has the function wrapped (``wrap_handle_tensordesc``) to replace each descriptor by
# ``make_tensordesc_arg(descriptor, its metadata)``. Read in each release's source and run by every GPU test.
# - "spread" (Triton 3.6.0: a C module built per kernel): ``launch(gridX, gridY, gridZ, stream, function,
#   cooperative_grid, pdl, global_scratch, profile_scratch, kernel_metadata, launch_metadata, enter_hook,
#   exit_hook, *arguments)``;
# - "packed" (Triton 3.7.0, 3.7.1, 3.8.0 and 3.9.0: one C function for every kernel): ``launch(gridX, gridY, gridZ,
#   stream, function, cooperative_grid, pdl, kernel_metadata, launch_metadata, enter_hook, exit_hook,
#   global_scratch, profile_scratch, arg_annotations, kernel_signature, arguments)``, ``arguments`` one sequence.
#   From 3.8 the wrapper for TMA descriptors is another function (``wrap_handle_tensordesc_impl``), which launches
#   keep.
# Elsewhere (other versions, other launchers, kernels that need scratch memory or instrumentation) launches go
# through ``CompiledKernel.run``, whose arguments are spread in every release.
DIRECT_LAUNCH_CONVENTIONS = {"3.6.": "spread", "3.7.": "packed", "3.8.": "packed", "3.9.": "packed"}


def direct_launch_convention() -> str | None:
    """The running Triton's entry of :data:`DIRECT_LAUNCH_CONVENTIONS`, or ``None``."""
    version = triton.__version__
    return next((form for prefix, form in DIRECT_LAUNCH_CONVENTIONS.items() if version.startswith(prefix)), None)


class DescriptorExpansion:
    """``expand(arguments) -> list``: a kernel's tensor arguments as its C launch function takes them, each TMA
    descriptor replaced by its launcher module's ``make_tensordesc_arg(descriptor, metadata)`` (a ``CUtensorMap``
    encoded by the driver, then the shape and strides).

    Arguments:
        metadata: argument position -> the compiled kernel's metadata of the descriptor there.
        make: the launcher module's ``make_tensordesc_arg``.

    An expansion depends on the descriptor's data pointer, shape, strides and padding, and on the position's
    metadata. It is made once per (position, data pointer) and reused while the descriptor's other fields are
    equal: encoding the map costs a few µs of host time per descriptor, and PyTorch's caching allocator hands a
    plan the same few pointers call after call (``benchmarks/NOTES.md``, v113)."""

    # expansions kept per position; past it they are dropped and made again (a process whose tensors keep moving)
    MAX_POINTERS = 64

    def __init__(self, metadata: dict[int, object], make: Callable) -> None:
        self.metadata, self.make = metadata, make
        self.made: dict[int, dict[int, tuple]] = {position: {} for position in metadata}

    def __call__(self, arguments: tuple) -> list:
        expanded = []
        for position, argument in enumerate(arguments):
            made = self.made.get(position)
            if made is None:
                expanded.append(argument)
                continue
            fields = (argument.shape, argument.strides, argument.padding)
            pointer = argument.base.data_ptr()
            entry = made.get(pointer)
            if entry is None or entry[0] != fields:
                if len(made) >= self.MAX_POINTERS:
                    made.clear()
                entry = made[pointer] = (fields, self.make(argument, self.metadata[position]))
            expanded.extend(entry[1])
        return expanded


def _descriptor_wrapper_closure(launch) -> dict | None:
    """The variables of Triton's ``wrap_handle_tensordesc`` wrapper, in 3.6 and 3.7 (``launcher``, the C function;
    ``tensordesc_indices``; ``tensordesc_meta``), or ``None`` where ``launch`` is not that wrapper."""
    code, closure = getattr(launch, "__code__", None), getattr(launch, "__closure__", None)
    if code is None or closure is None:
        return None
    variables = dict(zip(code.co_freevars, (cell.cell_contents for cell in closure)))
    return variables if {"launcher", "tensordesc_indices", "tensordesc_meta"} <= variables.keys() else None


class DirectLaunch(NamedTuple):
    """How :class:`CompiledLaunch` launches a compiled kernel: ``launch(gridX, gridY, gridZ, stream, *between,
    *arguments)``, or with ``packed`` ``launch(gridX, gridY, gridZ, stream, *between, arguments)``, where
    ``arguments`` are the tensor arguments (through ``expand`` where it is not ``None``), then the trailing ones."""

    launch: Callable
    between: tuple
    expand: DescriptorExpansion | None
    packed: bool


def direct_launch(kernel) -> DirectLaunch:
    """The :class:`DirectLaunch` of a compiled kernel, with no listening hooks: the C launch function of Triton's
    CUDA launcher where :data:`DIRECT_LAUNCH_CONVENTIONS` has the running version, else ``kernel.run``. A kernel
    that takes TMA descriptors gets a :class:`DescriptorExpansion` in place of the launcher's wrapper where every
    descriptor is lowered to a ``CUtensorMap`` (metadata for each); otherwise the wrapper expands them on every
    call."""
    run, convention = kernel.run, direct_launch_convention()
    if not (
        convention is not None
        and type(run).__name__ == "CudaLauncher"
        and run.global_scratch_size == 0
        and run.profile_scratch_size == 0
        and not getattr(run, "gsan_enabled", False)  # Triton's sanitizer (from 3.8), which adds arguments
    ):
        return DirectLaunch(run, (kernel.function, kernel.packed_metadata, None, None, None), None, packed=False)
    flags = (kernel.function, run.launch_cooperative_grid, run.launch_pdl)
    no_hooks = (None, None, None)  # launch metadata and hooks: none listen
    no_scratch = (None, None)
    if convention == "spread":
        between = (*flags, *no_scratch, kernel.packed_metadata, *no_hooks)
    else:
        between = (*flags, kernel.packed_metadata, *no_hooks, *no_scratch, run.arg_annotations, run.kernel_signature)
    packed = convention == "packed"
    wrapper = _descriptor_wrapper_closure(run.launch)
    if wrapper is None or not wrapper["tensordesc_meta"] or None in wrapper["tensordesc_meta"]:
        return DirectLaunch(run.launch, between, None, packed)
    positions = sorted(wrapper["tensordesc_indices"])  # the wrapper's metadata follows the positions' order
    make = sys.modules[type(run).__module__].make_tensordesc_arg
    expand = DescriptorExpansion(dict(zip(positions, wrapper["tensordesc_meta"])), make)
    return DirectLaunch(wrapper["launcher"], between, expand, packed)


class CompiledLaunch:
    """``launch(*tensors)``: one ``@triton.jit`` kernel with a fixed grid, scalars and constexprs.

    Arguments:
        fn: the ``@triton.jit`` or ``@gluon.jit`` function; its parameters are the tensors (or
            TMA descriptors of them), then ``scalars``, then ``constexprs`` (by name, in
            declaration order).
        grid: ``(x, y, z)`` programs.
        scalars: the Python ints and floats that follow the tensors.
        constexprs: the ``tl.constexpr`` parameters.
        tile: ``num_warps`` and ``num_stages``.
        device: the tensors' device, current when the launch is called
            (:func:`on_its_device`); the kernel runs on its current stream.
        launch_pdl: launch as the previous kernel's programmatic dependent (compute
            capability 9.0 and later): the kernel may start once every program of the
            previous one has run ``griddepcontrol.launch_dependents``, and must itself
            wait for what it reads of the previous kernel's results.

    Under Triton's interpreter every call goes through the interpreter.
    """

    def __init__(
        self,
        fn,
        grid: tuple[int, int, int],
        scalars: tuple,
        constexprs: dict,
        tile: Tile,
        device: torch.device,
        *,
        launch_pdl: bool = False,
    ) -> None:
        self.fn, self.grid, self.scalars, self.constexprs, self.tile = fn, grid, scalars, constexprs, tile
        self.launch_pdl = launch_pdl
        self.device, self.device_index = device, device.index
        self.trailing = (*scalars, *constexprs.values())
        self.kernel = None
        self.direct: DirectLaunch | None = None
        self.compiling = None  # (process id, future) of compile_in_background, if any

    def _check_constexprs(self, tensors: tuple) -> None:
        names = list(self.fn.arg_names[len(tensors) + len(self.scalars) :])
        if list(self.constexprs) != names:
            raise TypeError(f"{self.fn.__name__}: constexprs must be {names} in order; got {list(self.constexprs)}")

    def _options(self) -> dict:
        """Triton's launch options of this kernel. Floating-point fusion (a multiply and an add compiled as one FMA)
        is stated rather than left to Triton's default: the kernels are measured with it, and Triton 3.9 warns that
        its default turns it off from 3.10."""
        tile = self.tile
        return dict(
            num_warps=tile.num_warps, num_stages=tile.num_stages, launch_pdl=self.launch_pdl, enable_fp_fusion=True
        )

    def compile_in_background(self, *tensors: torch.Tensor) -> None:
        """Start compiling the kernel on a worker thread (Triton's ``warmup``: compile, no launch), so that
        the first call finds it in Triton's cache. ``tensors`` stand in for the call's: Triton specializes on
        their dtypes and 16-byte alignments only (their strides are among the scalars), so tensors of the same
        dtypes and alignments will do. Errors are left to the first call, which then compiles and raises them."""
        self._check_constexprs(tensors)
        warmup = functools.partial(
            self.fn.warmup, *tensors, *self.scalars, **self.constexprs, **self._options(), grid=self.grid
        )
        # on_its_device: Triton compiles for the current device
        self.compiling = (os.getpid(), _compile_threads().submit(on_its_device, warmup, self.device))

    def __call__(self, *tensors: torch.Tensor) -> None:
        if self.kernel is None:
            self._check_constexprs(tensors)
            if self.compiling is not None:
                process, future = self.compiling
                if process == os.getpid():  # a forked child would wait for its parent's thread forever
                    wait_for((future,))  # then the JIT finds the kernel in its cache
                self.compiling = None
            kernel = self.fn[self.grid](*tensors, *self.scalars, **self.constexprs, **self._options())
            if not KERNELS_INTERPRETED:
                self.kernel, self.direct = kernel, direct_launch(kernel)
            return
        grid = self.grid
        stream = torch._C._cuda_getCurrentRawStream(self.device_index)
        hooks = triton.knobs.runtime
        enter, leave = hooks.launch_enter_hook, hooks.launch_exit_hook
        if enter.calls or leave.calls:  # a profiler listens (e.g. Triton's proton): through run, with metadata
            kernel = self.kernel
            metadata = kernel.launch_metadata(grid, stream, *tensors, *self.trailing)
            args = (kernel.function, kernel.packed_metadata, metadata, enter, leave, *tensors, *self.trailing)
            kernel.run(grid[0], grid[1], grid[2], stream, *args)
            return
        launch, between, expand, packed = self.direct
        if expand is not None:
            tensors = expand(tensors)
        if packed:
            launch(grid[0], grid[1], grid[2], stream, *between, (*tensors, *self.trailing))
        else:
            launch(grid[0], grid[1], grid[2], stream, *between, *tensors, *self.trailing)


def causal_head_group(
    causal: bool, pairs: int, reread_bytes: int, share: float, device: torch.device, otherwise: int = 1
) -> int:
    """How many (batch, head) pairs a causal launch interleaves, heaviest tiles first (the Triton kernels'
    :func:`flashattn2._triton_common.heaviest_first`, the Hopper forward's schedule): all ``pairs`` where what
    their programs read again (``reread_bytes``, all pairs together) takes at most ``share`` of the device's L2
    cache, else ``otherwise``. 1 for a launch without the mask: its kernels never read the group, and an unused
    integer argument would still split Triton's specializations."""
    if not causal:
        return 1
    if device.type == "cuda" and fits_in_l2(reread_bytes, share, device):
        return max(pairs, 1)
    return otherwise


class TileChooser:
    """The tile of one kernel for each tuning key, chosen on the key's first call.

    ``choose(key, run, kernel)``, ``key`` a :class:`flashattn2._configs.TileKey`: without
    ``FLASHATTN2_AUTOTUNE=1`` the table's default (:func:`flashattn2._configs.default_tile`;
    ``run`` is not called); with it, the fastest of the candidates that fit the device, each timed as
    ``run(tile)`` (a function that launches the kernel with ``tile``, and
    whatever must precede it) with ``triton.testing.do_bench`` (median). The
    choice is kept for later calls of the key.
    """

    def __init__(self) -> None:
        self._chosen: dict[TileKey, Tile] = {}
        self.pinned: Tile | None = None  # set by benchmarks/tiles.py to run one configuration everywhere

    def choose(self, key: TileKey, run: Callable[[Tile], object], kernel: str) -> Tile:
        if self.pinned is not None:
            return self.pinned
        tile = self._chosen.get(key)
        if tile is None:
            if autotuning() and not KERNELS_INTERPRETED:
                tile = self._fastest(run, candidate_tiles(kernel, key.head_dim, key.dtype, key.device))
            else:
                tile = default_tile(kernel, key.head_dim, key.dtype, key.device, causal=key.causal, seq_len=key.seq_len)
            self._chosen[key] = tile
        return tile

    @staticmethod
    def _fastest(run: Callable[[Tile], object], tiles: list[Tile]) -> Tile:
        timings = {}
        for tile in tiles:
            try:
                timings[tile] = triton.testing.do_bench(
                    lambda tile=tile: run(tile), warmup=5, rep=20, return_mode="median"
                )
            except triton.runtime.errors.OutOfResources:  # registers or shared memory: not a candidate here
                continue
        if not timings:
            raise RuntimeError(f"flashattn2: none of the tile configurations {tiles} could run on this GPU")
        return min(timings, key=timings.get)
