"""Gluon helpers shared by the Hopper forward and backward kernels.

- :func:`zero_at_run_time` and :func:`one_of`: shared memory addressed afresh in each iteration of a loop, so that
  ptxas does not hoist the warpgroup products' shared-memory descriptors out of it and spill them.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl


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
    return smem._reinterpret(smem.dtype, [1, smem.shape[0], smem.shape[1]], smem.layout)
