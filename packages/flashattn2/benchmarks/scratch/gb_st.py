"""The Hopper backward: five tile products per (key tile, query tile) pair, written in Gluon.

Gluon (``triton.experimental.gluon``, Triton 3.6) exposes what the Triton
kernels of :mod:`flashattn2._triton_backward` cannot: Hopper's asynchronous
warpgroup products with explicit waits, TMA, mbarriers and warp specialization.
One program per 128-key tile of a (batch, k/v head) runs four partitions:

- a loader warp brings K and V once, then Q, dO, L and Delta of each query
  tile (128 rows at head dim 64, 64 at 128) by TMA into a two-slot ring;
- two consumer warpgroups, one per 64 keys, compute ``S^T``, ``dP^T``, dV and
  dK, 64 queries at a time, and their half of ``dQ = dS K`` (the fifth
  product): 64 query rows each of a 128-row tile, or half of the head
  dimension of a 64-row one; each hands its dQ piece to shared memory;
- two dQ writer warps, taking alternate query tiles, add the dQ tiles to an
  fp32 workspace with TMA bulk reduce-adds.

With grouped-query heads a program walks every query head of its k/v head in
turn; causal ones instead take one query head each and leave dK and dV in fp32
workspaces that ``_group_sum_kernel`` adds up in head order.

dQ stays deterministic: the writers add to query tile ``j`` in a fixed key-tile
order (the order in which the walk reaches it: from the diagonal's key tile
down), behind a counter per (batch, head, query tile) that each writer waits on
(acquire) and increments once its add has completed (release); the first key
tile in the order stores instead of adding, so the workspace needs no zeroing.
Programs take their key tile from a ticket counter in descending key order, so
every program a causal one waits on started before it; the non-causal walk
(each program starts at its own diagonal and wraps around) needs all key tiles
of a head resident at once, hence :func:`hopper_backward_applies`'s bound on
the sequence length.

Layers: the Gluon partitions and kernel; Triton kernels around it
(``_prologue_kernel``: Delta and zeroed counters;
``_epilogue_kernel``: the workspace in the gradient's dtype, after the kernel;
``_causal_epilogue_kernel``: the same for causal heads, launched as the
kernel's programmatic dependent so that it converts each query tile during the
kernel's tail, once the tile's counter says it is finished;
``_group_sum_kernel``: dK and dV of grouped heads); the launcher
:class:`HopperBackward`. Kernel design after FlashAttention-3's backward
(Shah et al. 2024, arXiv:2407.08608): a producer warp, consumer warpgroups,
and dQ accumulated outside the consumers, in key order in its deterministic
mode.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl
from triton._C.libtriton import ir
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language._core import builtin
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.language.extra.cuda import gdc_wait

from flashattn2 import _hopper
from flashattn2._configs import Tile
from flashattn2._launch import CompiledLaunch
from flashattn2._triton_common import LOG2_E, LOG2_E_IN_KERNEL

SUB_M = gl.constexpr(64)  # query rows per S^T and dP^T product (a warpgroup product's M)
BLOCK_N = gl.constexpr(128)  # keys per program: two consumer warpgroups of 64
DQ_COLS = gl.constexpr(64)  # dQ columns per consumer warpgroup and step: all of 64, half of 128
STAGES = gl.constexpr(2)  # slots of the Q/dO/L/Delta ring, and dS buffers
NUM_WARPS = 4  # the default partition: the first consumer warpgroup


@builtin
def _tma_reduce_add(tensor_desc, coord, src, _semantic=None):
    """``global[coord] += src`` (fp32) by TMA bulk reduce-add: Triton 3.6 has the operation but no Gluon wrapper."""
    coord = _semantic._convert_to_ir_values(coord, require_i64=False)
    _semantic.builder.create_async_tma_reduce(ir.DESCRIPTOR_REDUCE_KIND.ADD, tensor_desc.handle, coord, src.handle)


@gluon.jit
def _ptx(ASM: gl.constexpr):
    """Emit the PTX statement ``ASM`` (a fence, a bulk-group wait or a grid-dependency signal Gluon has no wrapper
    for), in a partition of any number of warps."""
    WARPS: gl.constexpr = gl.num_warps()
    one: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])
    x = gl.full([32 * WARPS], 0, gl.int32, one)
    gl.inline_asm_elementwise(ASM + " mov.u32 $0, $1;", "=r,r", [x], dtype=gl.int32, is_pure=False, pack=1)


@gluon.constexpr_function
def block_m(head_dim):
    """Query rows per step: 128 at head dim 64 (226 KB of shared memory, of the 227 KB an H100 block may
    have); at 128, K, V and the dQ buffers double and 64 rows fit."""
    return 128 if head_dim == 64 else 64


@gluon.constexpr_function
def _dq_row(warpgroup, head_dim):
    """The first row of consumer ``warpgroup``'s SUB_M x DQ_COLS piece of a dQ tile: a row half of a 128-row
    tile, or (with :func:`_dq_col`) a column half of a 64-row one."""
    return warpgroup * SUB_M if block_m(head_dim) == 2 * SUB_M else 0


@gluon.constexpr_function
def _dq_col(warpgroup, head_dim):
    """The first column of consumer ``warpgroup``'s piece of a dQ tile (see :func:`_dq_row`)."""
    return 0 if block_m(head_dim) == 2 * SUB_M else warpgroup * DQ_COLS


@gluon.jit
def _part(smem, h, count: gl.constexpr, dim: gl.constexpr):
    """``smem``'s part ``h`` of ``count`` elements along ``dim``: ``smem`` itself where that is all of it."""
    if smem.shape[dim] == count:
        return smem
    else:
        return smem.slice(h * count, count, dim=dim)


@gluon.jit
def _lse2(lse_smem, queries, n_ctx, layout: gl.constexpr):
    """The log2-domain logsumexp of a query tile's rows; +inf past the sequence's end, so that P is 0 there."""
    return gl.where(queries < n_ctx, lse_smem.load(layout) * LOG2_E_IN_KERNEL, float("inf"))


@gluon.jit
def _query_tile(n, step, key_tiles, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr):
    """The query tile key tile ``n`` visits at ``step``: from its diagonal up (causal) or around (full)."""
    RATIO: gl.constexpr = BLOCK_N // BLOCK_M
    if CAUSAL:
        return RATIO * n + step
    else:
        return (RATIO * n + step) % (RATIO * key_tiles)


@gluon.jit
def _steps(n, q_tiles, key_tiles, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr):
    """How many query tiles key tile ``n`` visits (per query head)."""
    RATIO: gl.constexpr = BLOCK_N // BLOCK_M
    if CAUSAL:
        return q_tiles - RATIO * n
    else:
        return RATIO * key_tiles


@gluon.jit
def _loader(
    q_desc,
    k_desc,
    v_desc,
    do_desc,
    lse_desc,
    delta_desc,
    q_smem,
    do_smem,
    k_smem,
    v_smem,
    ld_smem,
    kv_bar,
    q_ready,
    q_empty,
    b,
    hk,
    h0,
    n,
    n_heads,
    heads,
    n_ctx,
    q_tiles,
    key_tiles,
    CAUSAL: gl.constexpr,
    HEAD_DIM: gl.constexpr,
):
    """K and V once; then Q, dO, L, Delta of each visited query tile into the ring."""
    BLOCK_M: gl.constexpr = block_m(HEAD_DIM)
    mbarrier.expect(kv_bar, 2 * BLOCK_N * HEAD_DIM * 2)  # K and V, 2 bytes per element
    tma.async_copy_global_to_shared(k_desc, [b, hk, n * BLOCK_N, 0], kv_bar, k_smem.reshape([1, 1, BLOCK_N, HEAD_DIM]))
    tma.async_copy_global_to_shared(v_desc, [b, hk, n * BLOCK_N, 0], kv_bar, v_smem.reshape([1, 1, BLOCK_N, HEAD_DIM]))
    steps = _steps(n, q_tiles, key_tiles, CAUSAL, BLOCK_M)
    it = 0
    for g in range(n_heads):
        hq = h0 + g
        for s in range(steps):
            j = _query_tile(n, s, key_tiles, CAUSAL, BLOCK_M)
            if j < q_tiles:
                slot = it % STAGES
                mbarrier.wait(q_empty.index(slot), ((it // STAGES) & 1) ^ 1)
                # Q and dO tiles (2 bytes per element), L and Delta (fp32)
                mbarrier.expect(q_ready.index(slot), 2 * BLOCK_M * HEAD_DIM * 2 + 2 * BLOCK_M * 4)
                row = (b * heads + hq) * n_ctx + j * BLOCK_M
                tma.async_copy_global_to_shared(lse_desc, [row], q_ready.index(slot), ld_smem.index(2 * slot))
                tma.async_copy_global_to_shared(delta_desc, [row], q_ready.index(slot), ld_smem.index(2 * slot + 1))
                tma.async_copy_global_to_shared(
                    q_desc,
                    [b, hq, j * BLOCK_M, 0],
                    q_ready.index(slot),
                    q_smem.index(slot).reshape([1, 1, BLOCK_M, HEAD_DIM]),
                )
                tma.async_copy_global_to_shared(
                    do_desc,
                    [b, hq, j * BLOCK_M, 0],
                    q_ready.index(slot),
                    do_smem.index(slot).reshape([1, 1, BLOCK_M, HEAD_DIM]),
                )
                it += 1


@gluon.jit
def _dq_writer(
    writer_args,
    CAUSAL: gl.constexpr,
    WRITER: gl.constexpr,
    HEAD_DIM: gl.constexpr,
):
    """Writer ``WRITER`` of two: adds the dQ tiles of every other step, each in its turn on the query tile (the
    first in the order stores).
    ``writer_args``: the kernel's run-time arguments, named where unpacked."""
    (
        dq_desc,
        dq_smem,
        dq_full,
        dq_empty,
        counters,
        b,
        h0,
        n,
        n_heads,
        heads,
        q_tiles,
        key_tiles,
    ) = writer_args
    BLOCK_M: gl.constexpr = block_m(HEAD_DIM)
    RATIO: gl.constexpr = BLOCK_N // BLOCK_M
    steps = _steps(n, q_tiles, key_tiles, CAUSAL, BLOCK_M)
    it = 0
    for g in range(n_heads):
        hq = h0 + g
        for s in range(steps):
            j = _query_tile(n, s, key_tiles, CAUSAL, BLOCK_M)
            if j < q_tiles:
                if it % 2 == WRITER:
                    buf = WRITER  # each writer owns one of the two dQ buffers
                    mbarrier.wait(dq_full.index(buf), (it // 2) & 1)
                    # The key tiles that visit tile j before this one (one every RATIO steps
                    # of the walk) have each counted one completed write.
                    counter = counters + (b * heads + hq) * q_tiles + j
                    turn = s // RATIO
                    done = gl.atomic_add(counter, 0, sem="acquire", scope="gpu")
                    while done < turn:
                        done = gl.atomic_add(counter, 0, sem="acquire", scope="gpu")
                    _ptx("fence.proxy.async.global;")  # the earlier adds, seen by this warp, reach the TMA unit
                    fence_async_shared()  # the consumers' dQ stores, seen through dq_full, reach the TMA unit
                    for w in gl.static_range(2):  # the two consumer warpgroups' pieces
                        coord = [b, hq, j * BLOCK_M + _dq_row(w, HEAD_DIM), _dq_col(w, HEAD_DIM)]
                        src = dq_smem.index(2 * buf + w).reshape([1, 1, SUB_M, DQ_COLS])
                        if turn == 0:
                            tma.async_copy_shared_to_global(dq_desc, coord, src)
                        else:
                            _tma_reduce_add(dq_desc, coord, src)
                    _ptx("cp.async.bulk.commit_group; cp.async.bulk.wait_group 0;")  # the write has completed
                    # A causal tile's last add is key tile 0's: the causal epilogue reads the finished tile with
                    # ordinary loads, so the TMA unit's writes are made visible to them.
                    if CAUSAL:  # noqa: SIM102 (a branch at compile time around one at run time)
                        if n == 0:
                            _ptx("fence.proxy.async.global;")
                    gl.atomic_add(counter, 1, sem="release", scope="gpu")
                    mbarrier.arrive(dq_empty.index(buf))
                it += 1


@gluon.jit
def _consumer(
    consumer_args,
    CAUSAL: gl.constexpr,
    WARPGROUP: gl.constexpr,
    HEAD_DIM: gl.constexpr,
):
    """Keys ``[n * BLOCK_N + 64 * WARPGROUP, +64)`` for dK, dV; the dQ piece at ``_dq_row``, ``_dq_col``.
    ``consumer_args``: the kernel's run-time arguments, named where unpacked."""
    (
        q_smem,
        do_smem,
        k_smem,
        v_smem,
        ds_smem,
        dq_smem,
        ld_smem,
        kv_bar,
        q_ready,
        q_empty,
        ds_ready,
        ds_free,
        dq_full,
        dq_empty,
        dk_ptr,
        dv_ptr,
        b,
        dkv_head,
        n,
        n_heads,
        n_ctx,
        q_tiles,
        key_tiles,
        qk_scale_log2,
        softmax_scale,
        stride_dkb,
        stride_dkh,
        stride_dkn,
    ) = consumer_args
    BLOCK_M: gl.constexpr = block_m(HEAD_DIM)
    RATIO: gl.constexpr = BLOCK_N // BLOCK_M
    KEYS: gl.constexpr = BLOCK_N // 2  # each of the two consumer warpgroups
    st_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, SUB_M, 16]
    )
    kv_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16]
    )
    dq_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, DQ_COLS, 16]
    )
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=kv_layout, k_width=2)
    OUT_LANES: gl.constexpr = HEAD_DIM // 8  # lanes along a row, 8 elements each
    out_layout: gl.constexpr = gl.BlockedLayout([16 // (32 // OUT_LANES), 8], [32 // OUT_LANES, OUT_LANES], [4, 1], [1, 0])
    # L and Delta of SUB_M queries read from shared memory where they are used (after the products they wait
    # for) rather than before: at head dim 128 they would otherwise hold 32 registers across S^T and dP^T and
    # spill; at 64, reading them early keeps the shared-memory latency off the critical path.
    LATE_ROW_LOADS: gl.constexpr = HEAD_DIM > 64
    col_layout: gl.constexpr = gl.SliceLayout(0, st_layout)
    row_layout: gl.constexpr = gl.SliceLayout(1, st_layout)

    k_mine = k_smem.slice(WARPGROUP * KEYS, KEYS)
    v_mine = v_smem.slice(WARPGROUP * KEYS, KEYS)
    k_dq = _part(k_smem, _dq_col(WARPGROUP, HEAD_DIM) // DQ_COLS, DQ_COLS, 1)  # B of this piece's dQ
    zero_st = gl.zeros([KEYS, SUB_M], gl.float32, st_layout)
    zero_dq = gl.zeros([SUB_M, DQ_COLS], gl.float32, dq_layout)
    dk = warpgroup_mma_init(gl.zeros([KEYS, HEAD_DIM], gl.float32, kv_layout))
    dv = warpgroup_mma_init(gl.zeros([KEYS, HEAD_DIM], gl.float32, kv_layout))
    offs_col = gl.arange(0, SUB_M, layout=col_layout)
    keys = n * BLOCK_N + WARPGROUP * KEYS + gl.arange(0, KEYS, layout=row_layout)
    key_ok = keys < n_ctx
    steps = _steps(n, q_tiles, key_tiles, CAUSAL, BLOCK_M)
    mbarrier.wait(kv_bar, 0)
    it = 0
    for _head in range(n_heads):  # the query heads this program walks
        for s in range(steps):
            j = _query_tile(n, s, key_tiles, CAUSAL, BLOCK_M)
            if j < q_tiles:
                slot = it % STAGES
                mbarrier.wait(q_ready.index(slot), (it // STAGES) & 1)
                for h in gl.static_range(BLOCK_M // SUB_M):  # the tile's SUB_M-query parts
                    q_h = _part(q_smem.index(slot), h, SUB_M, 0)
                    do_h = _part(do_smem.index(slot), h, SUB_M, 0)
                    queries = j * BLOCK_M + h * SUB_M + offs_col
                    if not LATE_ROW_LOADS:
                        lse2 = _lse2(_part(ld_smem.index(2 * slot), h, SUB_M, 0), queries, n_ctx, col_layout)
                        delta = _part(ld_smem.index(2 * slot + 1), h, SUB_M, 0).load(col_layout)
                    # S^T and dP^T (keys x queries), issued back to back
                    st = warpgroup_mma(k_mine, q_h.permute((1, 0)), zero_st, use_acc=False, is_async=True)
                    dpt = warpgroup_mma(v_mine, do_h.permute((1, 0)), zero_st, use_acc=False, is_async=True)
                    st = warpgroup_mma_wait(num_outstanding=1, deps=(st,))
                    if LATE_ROW_LOADS:
                        lse2 = _lse2(_part(ld_smem.index(2 * slot), h, SUB_M, 0), queries, n_ctx, col_layout)
                    pt = gl.exp2(st * qk_scale_log2 - lse2[None, :])
                    # Masked after the exponent: a score of -inf times a negative scale would be +inf.
                    if CAUSAL:  # noqa: SIM102 (a branch at compile time around one at run time)
                        if s < RATIO:  # the diagonal's query tiles
                            pt = gl.where(keys[:, None] <= queries[None, :], pt, 0.0)
                    if (n + 1) * BLOCK_N > n_ctx:  # the ragged last key tile
                        pt = gl.where(key_ok[:, None], pt, 0.0)
                    pt_a = gl.convert_layout(pt.to(ds_smem.dtype), a_layout)
                    dpt = warpgroup_mma_wait(num_outstanding=0, deps=(dpt,))
                    if LATE_ROW_LOADS:
                        delta = _part(ld_smem.index(2 * slot + 1), h, SUB_M, 0).load(col_layout)
                    dst = (pt * (dpt - delta[None, :])).to(ds_smem.dtype)
                    if h == 0:
                        mbarrier.wait(ds_free.index(slot), ((it // STAGES) & 1) ^ 1)
                    ds_h = _part(ds_smem.index(slot).slice(WARPGROUP * KEYS, KEYS), h, SUB_M, 1)
                    ds_h.store(dst)
                    fence_async_shared()
                    dv = warpgroup_mma(pt_a, do_h, dv, is_async=True)
                    dk = warpgroup_mma(ds_h, q_h, dk, is_async=True)
                # dQ needs both warpgroups' dS: meet on the dS buffer
                mbarrier.arrive(ds_ready.index(slot))
                mbarrier.wait(ds_ready.index(slot), (it // STAGES) & 1)
                ds_t = ds_smem.index(slot)
                ds_dq = _part(ds_t, _dq_row(WARPGROUP, HEAD_DIM) // SUB_M, SUB_M, 1).permute((1, 0))  # its dS
                dq = warpgroup_mma(ds_dq, k_dq, zero_dq, use_acc=False, is_async=True)
                dq = warpgroup_mma_wait(num_outstanding=0, deps=(dq,))
                mbarrier.arrive(ds_free.index(slot))
                mbarrier.arrive(q_empty.index(slot))
                buf = it % 2
                mbarrier.wait(dq_empty.index(buf), ((it // 2) & 1) ^ 1)
                # the writer fences these stores for the TMA unit once dq_full says they are done
                dq_smem.index(2 * buf + WARPGROUP).store(dq * softmax_scale)
                mbarrier.arrive(dq_full.index(buf))
                it += 1
    dk = warpgroup_mma_wait(num_outstanding=0, deps=(dk,))
    dv = warpgroup_mma_wait(num_outstanding=0, deps=(dv,))
    rows = n * BLOCK_N + WARPGROUP * KEYS + gl.arange(0, KEYS, layout=gl.SliceLayout(1, kv_layout))
    cols = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, kv_layout))
    offs = b * stride_dkb + dkv_head * stride_dkh + rows[:, None] * stride_dkn + cols[None, :]
    mask = (rows < n_ctx)[:, None]
    # Stored from a layout in which a warp writes whole rows, 16 bytes a thread (the products' layout writes
    # 16 bytes of each of 8 rows per instruction); the same warp holds the same rows in both layouts.
    gl.store(dk_ptr + gl.convert_layout(offs, out_layout), gl.convert_layout((dk * softmax_scale).to(dk_ptr.dtype.element_ty), out_layout), mask=gl.convert_layout(mask, out_layout))
    gl.store(dv_ptr + gl.convert_layout(offs, out_layout), gl.convert_layout(dv.to(dv_ptr.dtype.element_ty), out_layout), mask=gl.convert_layout(mask, out_layout))


@gluon.jit
def _hopper_backward_kernel(
    q_desc,
    k_desc,
    v_desc,
    do_desc,
    dq_desc,
    lse_desc,
    delta_desc,
    dk_ptr,
    dv_ptr,
    counters,
    ticket,
    heads,
    group,
    n_ctx,
    q_tiles,
    key_tiles,
    qk_scale_log2,
    softmax_scale,
    stride_dkb,
    stride_dkh,
    stride_dkn,
    CAUSAL: gl.constexpr,
    HEAD_DIM: gl.constexpr,
    PER_QUERY_HEAD: gl.constexpr,
):
    if CAUSAL:  # the causal dq epilogue, this kernel's programmatic dependent, may start once every program has
        _ptx("griddepcontrol.launch_dependents;")
    # Work in the order programs start, key tiles descending: a program only waits on started ones.
    item = gl.atomic_add(ticket, 1)
    n = key_tiles - 1 - item % key_tiles
    if PER_QUERY_HEAD:  # one query head per program; dK and dV go to its rows of a workspace
        bh = item // key_tiles
        b = bh // heads
        h0 = bh % heads
        hk = h0 // group
        n_heads = 1
        dkv_head = h0
    else:  # every query head of k/v head hk in turn
        kv_heads = heads // group
        b = item // key_tiles // kv_heads
        hk = item // key_tiles % kv_heads
        h0 = hk * group
        n_heads = group
        dkv_head = hk
    BLOCK_M: gl.constexpr = block_m(HEAD_DIM)

    dtype: gl.constexpr = q_desc.dtype
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    k_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], kv_layout)
    v_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], kv_layout)
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    q_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_DIM], q_layout)
    do_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_DIM], q_layout)
    ds_smem = gl.allocate_shared_memory(
        dtype, [STAGES, BLOCK_N, BLOCK_M], gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_M], dtype)
    )
    # two buffers x the two consumer warpgroups' pieces; the 128-byte swizzle of dq_desc's blocks
    dq_smem = gl.allocate_shared_memory(
        gl.float32, [4, SUB_M, DQ_COLS], gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    )
    ld_smem = gl.allocate_shared_memory(
        gl.float32, [2 * STAGES, BLOCK_M], gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1)
    )
    kv_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    q_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    ds_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    ds_free = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    dq_full = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    dq_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(q_ready.index(i), count=1)
        mbarrier.init(q_empty.index(i), count=2)
        mbarrier.init(ds_ready.index(i), count=2)
        mbarrier.init(ds_free.index(i), count=2)
    for i in gl.static_range(2):
        mbarrier.init(dq_full.index(i), count=2)
        mbarrier.init(dq_empty.index(i), count=1)
    fence_async_shared()

    # Arguments shared by partitions that differ only in a constexpr, packed once. The constexprs are passed
    # beside the tuple: Gluon 3.6 hands a tuple built in the kernel to the partitions as run-time values.
    consumer_args = (
        q_smem,
        do_smem,
        k_smem,
        v_smem,
        ds_smem,
        dq_smem,
        ld_smem,
        kv_bar,
        q_ready,
        q_empty,
        ds_ready,
        ds_free,
        dq_full,
        dq_empty,
        dk_ptr,
        dv_ptr,
        b,
        dkv_head,
        n,
        n_heads,
        n_ctx,
        q_tiles,
        key_tiles,
        qk_scale_log2,
        softmax_scale,
        stride_dkb,
        stride_dkh,
        stride_dkn,
    )
    writer_args = (dq_desc, dq_smem, dq_full, dq_empty, counters, b, h0, n, n_heads, heads, q_tiles, key_tiles)
    gl.warp_specialize(
        [
            (_consumer, (consumer_args, CAUSAL, 0, HEAD_DIM)),
            (_consumer, (consumer_args, CAUSAL, 1, HEAD_DIM)),
            (
                _loader,
                (
                    q_desc,
                    k_desc,
                    v_desc,
                    do_desc,
                    lse_desc,
                    delta_desc,
                    q_smem,
                    do_smem,
                    k_smem,
                    v_smem,
                    ld_smem,
                    kv_bar,
                    q_ready,
                    q_empty,
                    b,
                    hk,
                    h0,
                    n,
                    n_heads,
                    heads,
                    n_ctx,
                    q_tiles,
                    key_tiles,
                    CAUSAL,
                    HEAD_DIM,
                ),
            ),
            (_dq_writer, (writer_args, CAUSAL, 0, HEAD_DIM)),
            (_dq_writer, (writer_args, CAUSAL, 1, HEAD_DIM)),
        ],
        [4, 1, 1, 1],  # warps of the partitions after the first (the default partition's NUM_WARPS)
        # Registers per thread: the consumers hold dK, dV and two score tiles (ptxas: 168 used);
        # 8 consumer warps x 32 x 240 + 3 warps x 32 x 24 = 63,744, within an SM's 65,536.
        [240, 24, 24, 24],
    )


@triton.jit
def _prologue_kernel(
    out,
    grad_out,
    delta,
    counters,
    stride_ob,
    stride_oh,
    stride_on,
    stride_gb,
    stride_gh,
    stride_gn,
    heads,
    n_ctx,
    q_tiles,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    """Program (query tile of BLOCK_M rows, batch * head): Delta = rowsum(O * dO) of the tile's rows, and the
    tile's counter zeroed (and by the first program the ticket, ``counters[-1]``)."""
    tile, bh = tl.program_id(0), tl.program_id(1)
    b, h = bh // heads, bh % heads
    rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, HEAD_DIM)
    ok = rows < n_ctx
    o = tl.load(out + b * stride_ob + h * stride_oh + rows[:, None] * stride_on + cols[None, :], mask=ok[:, None])
    do = tl.load(grad_out + b * stride_gb + h * stride_gh + rows[:, None] * stride_gn + cols[None, :], mask=ok[:, None])
    tl.store(delta + bh * n_ctx + rows, tl.sum(o.to(tl.float32) * do.to(tl.float32), 1), mask=ok)
    tl.store(counters + bh * q_tiles + tile, 0)
    if tile + bh == 0:
        tl.store(counters + tl.num_programs(0) * tl.num_programs(1), 0)  # the ticket


SUM_ROWS = tl.constexpr(64)  # rows per program of the epilogue and the group sum


@triton.jit
def _convert_rows(dq_acc, dq, first, count, ROWS: tl.constexpr, HEAD_DIM: tl.constexpr):
    """dq's rows ``[first, first + min(ROWS, count))`` (contiguous, its dtype) = the fp32 workspace's."""
    r = tl.arange(0, ROWS)
    offs = (first + r)[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    ok = (r < count)[:, None]
    # .cg: from L2, where the TMA unit's adds are, whatever this multiprocessor's L1 holds
    tl.store(dq + offs, tl.load(dq_acc + offs, mask=ok, cache_modifier=".cg").to(dq.dtype.element_ty), mask=ok)


@triton.jit
def _epilogue_kernel(dq_acc, dq, rows, HEAD_DIM: tl.constexpr):
    """dq (contiguous, its dtype) = the fp32 workspace (rows x the head dimension)."""
    first = tl.program_id(0) * SUM_ROWS
    _convert_rows(dq_acc, dq, first, rows - first, SUM_ROWS, HEAD_DIM)


CAUSAL_EPILOGUE_ROWS = tl.constexpr(1024)  # rows per program of the causal epilogue (NOTES v62)


@triton.jit
def _causal_epilogue_kernel(dq_acc, dq, counters, n_ctx, q_tiles, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """Program (CAUSAL_EPILOGUE_ROWS rows, batch * head): dq (contiguous, its dtype) = the fp32 workspace, each
    query tile of BLOCK_M rows once its counter says that every key tile has added to it.

    Launched as the causal backward kernel's programmatic dependent, its programs start while the backward's
    last, longest programs run, on the multiprocessors those leave idle; query tiles finish one after another
    there (key tile 0 adds last to each), and each is converted soon after."""
    TILES: tl.constexpr = CAUSAL_EPILOGUE_ROWS // BLOCK_M
    bh = tl.program_id(1)
    for t in range(TILES):
        tile = tl.program_id(0) * TILES + t
        if tile < q_tiles:
            counter = counters + bh * q_tiles + tile
            adders = tile // (BLOCK_N // BLOCK_M) + 1  # key tiles 0 to the diagonal's
            done = tl.atomic_add(counter, 0, sem="acquire", scope="gpu")
            while done < adders:
                # about a microsecond between polls (a step of the backward takes a few), so that the polls
                # do not compete with the backward's own counter traffic
                tl.inline_asm_elementwise("nanosleep.u32 1000; mov.u32 $0, $1;", "=r,r", [done], tl.int32, False, 1)
                done = tl.atomic_add(counter, 0, sem="acquire", scope="gpu")
            _convert_rows(dq_acc, dq, bh * n_ctx + tile * BLOCK_M, n_ctx - tile * BLOCK_M, BLOCK_M, HEAD_DIM)
    gdc_wait()  # ends after the backward kernel: what follows in the stream may read dk and dv too


@triton.jit
def _group_sum_kernel(dk_acc, dv_acc, dk, dv, heads, group, n_ctx, HEAD_DIM: tl.constexpr):
    """Program (row tile, batch * k/v head): dk and dv (contiguous, their dtype) = the sums of the fp32
    workspaces ``(B, H, N, D)`` over the query heads that share the k/v head, in head order."""
    tile, bhk = tl.program_id(0), tl.program_id(1)
    kv_heads = heads // group
    b, hk = bhk // kv_heads, bhk % kv_heads
    rows = tile * SUM_ROWS + tl.arange(0, SUM_ROWS)
    cols = tl.arange(0, HEAD_DIM)
    ok = (rows < n_ctx)[:, None]
    sum_k = tl.zeros([SUM_ROWS, HEAD_DIM], tl.float32)
    sum_v = tl.zeros([SUM_ROWS, HEAD_DIM], tl.float32)
    for g in range(group):
        src = ((b * heads + hk * group + g) * n_ctx + rows[:, None]) * HEAD_DIM + cols[None, :]
        sum_k += tl.load(dk_acc + src, mask=ok)
        sum_v += tl.load(dv_acc + src, mask=ok)
    dst = (bhk * n_ctx + rows[:, None]) * HEAD_DIM + cols[None, :]
    tl.store(dk + dst, sum_k.to(dk.dtype.element_ty), mask=ok)
    tl.store(dv + dst, sum_v.to(dv.dtype.element_ty), mask=ok)


# The prologue's, epilogue's and group sum's programs: 4 warps, no pipelining (the tile's rows are the
# kernels' constexprs; they span the head dimension).
_ROWS_TILE = Tile(SUM_ROWS.value, SUM_ROWS.value, 4, 1)

# Where the kernel is faster than the Triton kernels (benchmarks/hopper_kernels.py, NOTES v35, v39, v40, v51), by
# head dim: from 2048 keys per sequence (at 64: 0.87-0.94x their time at N = 2048, 1.03-1.04x at 1024 with 2**27 or
# 2**29 scores, 0.95-0.98x at 1024 with 2**30; at 128: 0.83-0.88x at 2048, 0.97x at (8, 16, 1024)), with at least
# 2**26 scores (batch x heads x N^2), the fewest measured ((1, 16, 2048, 64) causal: 0.94x).
MIN_SEQ_LEN = {64: 2048, 128: 2048}
MIN_SCORES = 64 * 1024 * 1024


@functools.cache
def _multiprocessors(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _usable_multiprocessors(device_index: int) -> int:
    """The device's multiprocessors, or the share of them an MPS client is limited to."""
    percentage = os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "100")
    try:
        share = min(float(percentage), 100.0) / 100
    except ValueError:  # not a number: MPS would refuse it; assume the least
        share = 0.0
    return int(_multiprocessors(device_index) * share)


def hopper_backward_applies(q_shape, k_shape, tma_strides, dtype, device, causal: bool, aligned) -> bool:
    """Whether :class:`HopperBackward` runs this layout: :func:`flashattn2._hopper.layout_supported` (with
    ``tma_strides`` those of q, k, v and grad_out), at least :data:`MIN_SEQ_LEN` keys per sequence (by head dim) and
    :data:`MIN_SCORES` scores in all. A non-causal walk needs every key tile of a head resident at once: at
    most one 128-key tile per multiprocessor this process may use (an MPS client's share,
    ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``). ``FLASHATTN2_HOPPER_BACKWARD=0`` turns it off."""
    if not _hopper.enabled("backward") or not _hopper.layout_supported(
        "backward", q_shape, k_shape, tma_strides, dtype, device, aligned
    ):
        return False
    batch, heads, n, head_dim = q_shape
    if n < MIN_SEQ_LEN[head_dim] or batch * heads * n * n < MIN_SCORES:
        return False
    index = torch.cuda.current_device() if device.index is None else device.index
    return causal or triton.cdiv(n, BLOCK_N.value) <= _usable_multiprocessors(index)


class HopperBackward:
    """``backward(grad_out, q, k, v, out, lse, dq, dk, dv)``: fills dq, dk, dv for one layout.

    Arguments (constructor): the shapes ``(B, H, N, D)`` of q and ``(B, Hkv, N, D)`` of k
    (D in the backward's :data:`flashattn2._hopper.HEAD_DIMS`), the strides of out and grad_out, the
    dtype (fp16 or bf16), device, mask and softmax scale, for which :func:`hopper_backward_applies` holds.
    Call arguments: as ``triton_backward``'s (q, k, v, grad_out with TMA-ready strides, lse contiguous
    float32 ``(B, H, N)``), and the outputs: dq contiguous, dk and dv contiguous.
    """

    def __init__(self, q_shape, k_shape, out_stride, grad_stride, dtype, device, causal: bool, softmax_scale: float):
        batch, heads, n, head_dim = q_shape
        kv_heads = k_shape[1]
        self.causal, self.device = causal, device
        self.block_m = block_m(head_dim)
        q_tiles, key_tiles = triton.cdiv(n, self.block_m), triton.cdiv(n, BLOCK_N.value)
        self.head_dim = head_dim
        self.acc_shape = (batch, heads, n, head_dim)
        self.counter_slots = batch * heads * q_tiles + 1  # one per (batch, head, query tile), and the ticket
        self.rows = batch * heads * n
        # Causal with grouped-query heads: one program per (key tile, query head), each writing its dK and dV
        # to a workspace that group_sum adds up. A program walking the whole group would be that many times
        # longer, and descending tickets start each head's longest program last (0.89-0.94x the time at
        # three shapes, NOTES v44; non-causal walks are all equally long, and lost 11% this way).
        self.per_query_head = causal and kv_heads < heads
        self.grid = (key_tiles * batch * (heads if self.per_query_head else kv_heads),)
        self.group_sum = CompiledLaunch(
            _group_sum_kernel,
            (triton.cdiv(n, SUM_ROWS.value), batch * kv_heads, 1),
            (heads, heads // kv_heads, n),
            {"HEAD_DIM": head_dim},
            _ROWS_TILE,
            device,
        )
        self.scalars = (
            heads,
            heads // kv_heads,
            n,
            q_tiles,
            key_tiles,
            softmax_scale * LOG2_E,
            softmax_scale,
        )
        self.prologue = CompiledLaunch(
            _prologue_kernel,
            (q_tiles, batch * heads, 1),
            (*out_stride[:3], *grad_stride[:3], heads, n, q_tiles),
            {"HEAD_DIM": head_dim, "BLOCK_M": self.block_m},
            _ROWS_TILE,
            device,
        )
        if causal:  # overlapping the kernel's tail (NOTES v62)
            self.epilogue = CompiledLaunch(
                _causal_epilogue_kernel,
                (triton.cdiv(q_tiles, CAUSAL_EPILOGUE_ROWS.value // self.block_m), batch * heads, 1),
                (n, q_tiles),
                {"HEAD_DIM": head_dim, "BLOCK_M": self.block_m},
                _ROWS_TILE,
                device,
                launch_pdl=True,
            )
        else:  # a full walk finishes its query tiles together, at the end: converted after it
            self.epilogue = CompiledLaunch(
                _epilogue_kernel,
                (triton.cdiv(self.rows, SUM_ROWS.value), 1, 1),
                (self.rows,),
                {"HEAD_DIM": head_dim},
                _ROWS_TILE,
                device,
            )
        self.launched = False  # set once a call has compiled and launched the kernels
        element = gl.bfloat16 if dtype == torch.bfloat16 else gl.float16
        self.layouts = {
            "m": gl.NVMMASharedLayout.get_default_for([1, 1, self.block_m, head_dim], element),
            "n": gl.NVMMASharedLayout.get_default_for([1, 1, BLOCK_N.value, head_dim], element),
            "dq": gl.NVMMASharedLayout.get_default_for([1, 1, SUB_M.value, DQ_COLS.value], gl.float32),
            "row": gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1),
        }

    def __call__(self, grad_out, q, k, v, out, lse, dq, dk, dv) -> None:
        delta = torch.empty(self.rows, dtype=torch.float32, device=self.device)
        dq_acc = torch.empty(self.acc_shape, dtype=torch.float32, device=self.device)
        counters = torch.empty(self.counter_slots, dtype=torch.int32, device=self.device)
        self.prologue(out, grad_out, delta, counters)
        m, n, d, lay = self.block_m, BLOCK_N.value, self.head_dim, self.layouts
        if self.per_query_head:
            dk_out, dv_out = torch.empty((2, *self.acc_shape), dtype=torch.float32, device=self.device).unbind(0)
        else:
            dk_out, dv_out = dk, dv
        _hopper_backward_kernel[self.grid](
            TensorDescriptor.from_tensor(q, [1, 1, m, d], lay["m"]),
            TensorDescriptor.from_tensor(k, [1, 1, n, d], lay["n"]),
            TensorDescriptor.from_tensor(v, [1, 1, n, d], lay["n"]),
            TensorDescriptor.from_tensor(grad_out, [1, 1, m, d], lay["m"]),
            TensorDescriptor.from_tensor(dq_acc, [1, 1, SUB_M.value, DQ_COLS.value], lay["dq"]),
            TensorDescriptor.from_tensor(lse.view(-1), [m], lay["row"]),
            TensorDescriptor.from_tensor(delta, [m], lay["row"]),
            dk_out,
            dv_out,
            counters,
            counters[-1:],
            *self.scalars,
            *dk_out.stride()[:3],
            CAUSAL=self.causal,
            HEAD_DIM=d,
            PER_QUERY_HEAD=self.per_query_head,
            num_warps=NUM_WARPS,
        )
        # right after the kernel, whose programmatic dependent the causal epilogue is
        self.epilogue(*((dq_acc, dq, counters) if self.causal else (dq_acc, dq)))
        if self.per_query_head:
            self.group_sum(dk_out, dv_out, dk, dv)
        self.launched = True
