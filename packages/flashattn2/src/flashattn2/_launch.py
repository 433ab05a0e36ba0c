"""Launching the Triton kernels with little host time, and choosing their tiles.

:class:`KernelLauncher` launches a ``@triton.jit`` function the way
``fn[grid](*args, **kwargs)`` does, but after the first launch of each
specialization it calls the compiled kernel directly. ``JITFunction.run`` binds
every argument, asks Triton's C++ specializer about each one and builds a cache
key from them on every call: about 75 µs of host time per launch of our kernels
(Triton 3.6, cProfile on the H100 machine), more than a short sequence's kernel
takes on the GPU. The key here is a tuple of the same facts, computed in Python:
what Triton specializes on (an integer equal to 1 or divisible by 16, whether it
needs 64 bits; a tensor's dtype and 16-byte alignment), plus the constexprs and
the launch options.

:class:`TileChooser` picks the tile of a launcher: the shipped default of
:mod:`flashattn2._configs`, or with ``FLASHATTN2_AUTOTUNE=1`` the fastest
candidate timed on the first call's own inputs.
"""

from __future__ import annotations

from typing import Callable

import torch
import triton

from flashattn2._configs import Tile, autotuning, candidate_tiles, default_tile
from flashattn2._triton_common import KERNELS_INTERPRETED

# Integers outside this range are passed to the kernels as 64-bit values.
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _specialization(args: tuple) -> tuple:
    """What Triton specializes a compiled kernel on, for each runtime argument."""
    key = []
    for arg in args:
        kind = type(arg)
        if kind is int:
            key.append((arg == 1, arg % 16 == 0, _INT32_MIN <= arg <= _INT32_MAX))
        elif kind is float:
            key.append(None)
        else:  # a tensor
            key.append((arg.dtype, arg.data_ptr() % 16 == 0))
    return tuple(key)


class KernelLauncher:
    """``launch(grid, *args, tile=..., **constexprs)``: one ``@triton.jit`` function, launched cheaply.

    ``args`` are the kernel's runtime arguments in order (tensors, Python ints and
    floats); ``constexprs`` its remaining ``tl.constexpr`` parameters, passed by
    name in the order the kernel declares them; ``tile`` supplies ``num_warps`` and
    ``num_stages``. Under Triton's interpreter every launch goes through the
    interpreter.
    """

    def __init__(self, fn) -> None:
        self.fn = fn
        self._compiled: dict[tuple, object] = {}

    def __call__(self, grid: tuple[int, int, int], *args, tile: Tile, **constexprs) -> None:
        if KERNELS_INTERPRETED:
            self.fn[grid](*args, **constexprs, num_warps=tile.num_warps, num_stages=tile.num_stages)
            return
        key = (tile.num_warps, tile.num_stages, *constexprs.values(), _specialization(args))
        kernel = self._compiled.get(key)
        if kernel is None:
            self._check_constexpr_order(len(args), constexprs)
            # The first launch of this specialization: Triton compiles (or finds it in
            # its cache) and launches; later launches call the compiled kernel below.
            self._compiled[key] = self.fn[grid](
                *args, **constexprs, num_warps=tile.num_warps, num_stages=tile.num_stages
            )
            return
        stream = torch._C._cuda_getCurrentRawStream(torch.cuda.current_device())
        hooks = triton.knobs.runtime
        enter, leave = hooks.launch_enter_hook, hooks.launch_exit_hook
        if enter.calls or leave.calls:  # a profiler listens (e.g. Triton's proton)
            metadata = kernel.launch_metadata(grid, stream, *args, *constexprs.values())
        else:
            metadata, enter, leave = None, None, None
        kernel.run(
            grid[0], grid[1], grid[2], stream, kernel.function, kernel.packed_metadata, metadata, enter, leave,
            *args, *constexprs.values(),
        )

    def _check_constexpr_order(self, num_args: int, constexprs: dict) -> None:
        expected = self.fn.arg_names[num_args:]
        if list(constexprs) != expected:
            raise TypeError(f"{self.fn.__name__}: constexprs must be {expected} in this order; got {list(constexprs)}")


class TileChooser:
    """The tile of one kernel for each tuning key, chosen on the key's first call.

    ``choose(key, run, kernel, head_dim, dtype, causal, device)``: without
    ``FLASHATTN2_AUTOTUNE=1`` the table's default (``run`` is not called); with
    it, the fastest of the candidates that fit the device, each timed as
    ``run(tile)`` (a function that launches the kernel with ``tile``, and
    whatever must precede it) with ``triton.testing.do_bench`` (median). The
    choice is kept for later calls of the key, so ``key`` must hold everything
    the choice depends on (head dim, dtype, causal, device, and for tuning the
    sequence-length bucket).
    """

    def __init__(self) -> None:
        self._chosen: dict[tuple, Tile] = {}
        self.pinned: Tile | None = None  # set by benchmarks/tiles.py to run one configuration everywhere

    def choose(
        self, key: tuple, run: Callable[[Tile], object], kernel: str, head_dim: int, dtype: torch.dtype,
        causal: bool, device: torch.device,
    ) -> Tile:
        if self.pinned is not None:
            return self.pinned
        tile = self._chosen.get(key)
        if tile is None:
            if autotuning() and not KERNELS_INTERPRETED:
                tile = self._fastest(run, candidate_tiles(kernel, head_dim, dtype, device))
            else:
                tile = default_tile(kernel, head_dim, dtype, causal, device)
            self._chosen[key] = tile
        return tile

    @staticmethod
    def _fastest(run: Callable[[Tile], object], tiles: list[Tile]) -> Tile:
        timings = {}
        for tile in tiles:
            try:
                timings[tile] = triton.testing.do_bench(lambda: run(tile), warmup=5, rep=20, return_mode="median")
            except triton.runtime.errors.OutOfResources:  # registers or shared memory: not a candidate here
                continue
        if not timings:
            raise RuntimeError(f"flashattn2: none of the tile configurations {tiles} could run on this GPU")
        return min(timings, key=timings.get)

    def forget(self) -> None:
        """Drop the choices made so far (the next call of each key chooses again)."""
        self._chosen.clear()
