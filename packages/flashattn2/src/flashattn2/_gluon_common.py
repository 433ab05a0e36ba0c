"""Gluon helpers shared by the Hopper forward and backward kernels.

- :func:`zero_at_run_time` and :func:`one_of`: shared memory addressed afresh in each iteration of a loop, so that
  ptxas does not hoist the warpgroup products' shared-memory descriptors out of it and spill them.
- :data:`tma_load`, :data:`tma_store` and :func:`reinterpret`: Gluon operations under the names of the running Triton.
- :func:`accumulator_layout`: the registers of a warpgroup product's accumulator.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language._core import builtin
from triton.experimental.gluon.language.nvidia.hopper import tma

# Gluon's TMA copies are tma.async_load and tma.async_store from Triton 3.8 (3.9 removed the names 3.6 and 3.7 have,
# which 3.8 keeps as aliases of the new ones).
tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global


@builtin
def reinterpret(smem, dtype, shape, layout, _semantic=None):
    """Shared memory ``smem`` viewed with another ``dtype``, ``shape`` and ``layout``: the descriptor's
    ``reinterpret`` from Triton 3.9, ``_reinterpret`` before."""
    view = getattr(smem, "reinterpret", None) or smem._reinterpret
    return view(dtype, shape, layout, _semantic=_semantic)


@gluon.jit
def zero_at_run_time(x):
    """0, computed by an instruction the compiler cannot see through (``x`` only orders it in the loop): shared
    memory indexed by it is addressed afresh in each iteration, so that the products' shared-memory descriptors are
    not hoisted out of the loop, where ptxas would hold them all in registers and spill (benchmarks/NOTES.md, v106,
    v157)."""
    return gl.inline_asm_elementwise("mov.u32 $0, 0;", "=r,r", [x], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def one_of(smem):
    """``smem`` (2-D) as the only buffer of a one-buffer array, to be indexed by :func:`zero_at_run_time`."""
    return reinterpret(smem, smem.dtype, [1, smem.shape[0], smem.shape[1]], smem.layout)


@gluon.constexpr_function
def accumulator_layout(columns):
    """The register layout of one warpgroup's fp32 product accumulator of 64 rows (its four warps along the rows)
    and ``columns`` columns."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, columns, 16])
