"""The Hopper backward: five tile products per (key tile, query tile) pair, written in Gluon.

Gluon (``triton.experimental.gluon``, Triton 3.6) exposes what the Triton
kernels of :mod:`flashattn2._triton_backward` cannot: Hopper's asynchronous
warpgroup products with explicit waits, TMA, mbarriers and warp specialization.
A work item is a 128-key tile (64 at head dim 256) of a (batch, k/v head); a
program takes one (causal at head dims 128 and 256) or several in turn
(persistent, one program per multiprocessor: non-causal, and causal at head
dim 64, or at 128 and 256 where the items are dealt interleaved, with each
program's items dealt on the host) and runs four partitions:

- a loader warp brings an item's K and V once, then Q, dO, and L and Delta
  (the prologue's ``row_stats``) of each query tile (128 rows at head dim 64,
  64 at 128 and 256) by TMA into a ring of two slots (one at 256);
- two consumer warpgroups, one per 64 keys, compute ``S^T``, ``dP^T``, dV and
  dK, 64 queries at a time (at head dim 64 with their K and V rows held in
  registers), and their half of ``dQ = dS K`` (the fifth
  product): 64 query rows each of a 128-row tile, or half of the head
  dimension of a 64-row one; each hands its dQ piece to shared memory. At the
  item's end they write dK and dV: non-causal through their rows of the K and
  V buffers by TMA, then release the buffers to the next item's K and V;
  causal from registers, once the buffers are released. At head dim 256 both
  take the item's 64 keys, each computing S and dP for 32 of them and owning
  half of the head dimension of dK, dV and dQ (P and dS shared through shared
  memory), and write dK and dV from registers;
- two dQ writer warps, taking alternate query tiles, add the dQ tiles to an
  fp32 workspace with TMA bulk reduce-adds (at head dim 256 the first writer
  takes every tile); their last adds of an item overlap the next item's start.

With grouped-query heads a program walks every query head of its k/v head in
turn; causal ones instead take one query head each and leave dK and dV in fp32
workspaces that ``_group_sum_kernel`` adds up in head order.

dQ stays deterministic: the writers add to query tile ``j`` in a fixed key-tile
order (the order in which the walk reaches it: from the diagonal's key tile
down), behind a counter per (batch, head, query tile) that each writer waits on
(acquire) and increments once its add has completed (release); the first key
tile in the order stores instead of adding, so the workspace needs no zeroing.
Causal items wait only on earlier items (numbered by (batch, head), then key
tile descending): one-item programs take theirs from a ticket counter, so
every program a causal one waits on started before it; persistent ones take
lists dealt in an order in which each item follows those it waits on
(:func:`causal_backward_schedule`). The non-causal
walk (each key tile starts at its own diagonal and wraps around) needs all key
tiles of a head in progress at once, on distinct programs, hence
:func:`hopper_backward_applies`'s bound on the sequence length.

Layers: the Gluon partitions and kernel; Triton kernels around it
(``_prologue_kernel``: L and Delta of each query tile, and zeroed counters;
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
from triton.language.extra.cuda import gdc_wait

from flashattn2 import _hopper
from flashattn2._configs import Tile
from flashattn2._gluon_common import accumulator_layout, one_of, reinterpret, tma_load, tma_store, zero_at_run_time
from flashattn2._launch import CompiledLaunch, allocator
from flashattn2._tma import TmaDescriptor
from flashattn2._triton_common import LOG2_E, LOG2_E_IN_KERNEL

SUB_M = gl.constexpr(64)  # query rows per S^T and dP^T product (a warpgroup product's M)
DQ_COLS = gl.constexpr(64)  # columns of a dQ piece: all of 64, half of 128, a quarter of 256
SWIZZLE_COLS = gl.constexpr(64)  # 2-byte columns of a 128-byte swizzle block: dK and dV are written in such blocks
NUM_WARPS = 4  # the default partition: the first consumer warpgroup
# Whether the head-dim-64 consumers take S^T's and dP^T's A operands (K and V), and in the steps without the mask
# dK's (dS^T, where ds_t_in_registers says), from registers (see _consume_item). Measured under Triton 3.6; 3.7
# and 3.8 compile it with 3.6's registers and spills (12-68 bytes), while 3.9's ptxas (CUDA 13.4) spills 148-168
# bytes where the operands from shared memory spill none, not yet measured on a GPU (benchmarks/NOTES.md, v170).
REGISTER_OPERANDS = gl.constexpr(triton.__version__.startswith(("3.6.", "3.7.", "3.8.")))
# Causal walks take dK's dS^T from registers in their steps without the mask from this many keys: with it the
# head-dim-64 backward took 0.987-0.989x its time at 16384 keys, 0.993-0.996x at 8192, 1.00x at 4096 and
# 1.007-1.011x at 2048, where each item's spilled registers weigh on fewer steps (benchmarks/NOTES.md, v180).
CAUSAL_DS_T_IN_REGISTERS_MIN_KEYS = 8192
# Where a step's dK product takes its A operand dS^T from (see _consume_step), and how the dS stores are fenced for
# the products that read them from shared memory:
DS_T_REGISTERS = gl.constexpr(0)  # the registers that store the dS buffer; one fence before the dQ products
DS_T_SHARED = gl.constexpr(1)  # the dS buffer, after one fence for both 64-query parts' stores
DS_T_SHARED_PER_PART = gl.constexpr(2)  # the dS buffer, each part's after a fence for its own store


def ds_t_in_registers(head_dim: int, causal: bool, n: int) -> bool:
    """Whether the steps without the mask take dK's A operand dS^T from registers (see
    :data:`CAUSAL_DS_T_IN_REGISTERS_MIN_KEYS`): head dim 64 only, with :data:`REGISTER_OPERANDS`."""
    return head_dim == 64 and REGISTER_OPERANDS.value and (not causal or n >= CAUSAL_DS_T_IN_REGISTERS_MIN_KEYS)


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
def block_n(head_dim):
    """Keys per work item: 128 (a consumer warpgroup per 64) up to head dim 128. At 256, 64, which both
    warpgroups share, each owning half of the head dimension of dK and dV (FlashAttention-3's head-dim-256
    tiles): 128 keys of K and V would take 128 KB."""
    return 64 if head_dim == 256 else 128


@gluon.constexpr_function
def stages(head_dim):
    """Slots of the Q/dO/L/Delta ring, and dS buffers: 2, or 1 at head dim 256, where K, V, one slot, P^T,
    dS^T and the dQ pieces take 209 KB of the 227 KB (a second slot would need 64 KB more)."""
    return 1 if head_dim == 256 else 2


@gluon.constexpr_function
def dq_buffers(head_dim):
    """dQ buffers among the four SUB_M x DQ_COLS pieces of shared memory, each added by a writer of its own: 2
    of two pieces (a piece per consumer warpgroup), or at head dim 256 1 of four (two per warpgroup)."""
    return 1 if head_dim == 256 else 2


@gluon.constexpr_function
def _dq_row(piece, head_dim):
    """The first row of a dQ tile's SUB_M x DQ_COLS piece ``piece`` (a consumer warpgroup's, or at head dim 256
    one of its two): a row half of a 128-row tile, or (with :func:`_dq_col`) a column part of a 64-row one."""
    return piece * SUB_M if block_m(head_dim) == 2 * SUB_M else 0


@gluon.constexpr_function
def _dq_col(piece, head_dim):
    """The first column of a dQ tile's piece ``piece`` (see :func:`_dq_row`)."""
    return 0 if block_m(head_dim) == 2 * SUB_M else piece * DQ_COLS


@gluon.jit
def _part(smem, h, count: gl.constexpr, dim: gl.constexpr):
    """``smem``'s part ``h`` of ``count`` elements along ``dim``: ``smem`` itself where that is all of it."""
    if smem.shape[dim] == count:
        return smem
    else:
        return smem.slice(h * count, count, dim=dim)


@gluon.jit
def _warpgroup_ds_part(ds_smem, slot, h, WARPGROUP: gl.constexpr):
    """Part ``h`` (SUB_M queries) of consumer warpgroup WARPGROUP's key rows of dS^T in ring slot ``slot`` of
    ``ds_smem`` (``(STAGES, BLOCK_N, BLOCK_M)``, each warpgroup's half of the keys)."""
    KEYS: gl.constexpr = ds_smem.shape[1] // 2
    return _part(ds_smem.index(slot).slice(WARPGROUP * KEYS, KEYS), h, SUB_M, 1)


@gluon.jit
def _tile_rows(ld_smem, slot, WHICH: gl.constexpr, h, layout: gl.constexpr):
    """Rows ``[h * SUB_M, +SUB_M)`` (all of them where the tile has SUB_M) of the query tile in ring slot ``slot``
    of ``ld_smem`` (``_prologue_kernel``'s ``row_stats``): their log2-domain logsumexp (``WHICH`` 0) or Delta
    (``WHICH`` 1)."""
    rows: gl.constexpr = ld_smem.shape[1] // 2
    return _part(ld_smem.index(slot).slice(WHICH * rows, rows), h, SUB_M, 0).load(layout)


@gluon.jit
def _query_tile(n, step, key_tiles, CAUSAL: gl.constexpr, RATIO: gl.constexpr):
    """The query tile key tile ``n`` visits at ``step``, RATIO query tiles per key tile: from its diagonal up
    (causal) or around (full)."""
    if CAUSAL:
        return RATIO * n + step
    else:
        return (RATIO * n + step) % (RATIO * key_tiles)


@gluon.jit
def _steps(n, q_tiles, key_tiles, CAUSAL: gl.constexpr, RATIO: gl.constexpr):
    """How many query tiles key tile ``n`` visits (per query head), RATIO query tiles per key tile."""
    if CAUSAL:
        return q_tiles - RATIO * n
    else:
        return RATIO * key_tiles


@gluon.jit
def _item(item, heads, group, key_tiles, PER_QUERY_HEAD: gl.constexpr):
    """Work item -> (key tile, batch, k/v head, first query head, query heads walked, dK/dV head)."""
    n = key_tiles - 1 - item % key_tiles
    if PER_QUERY_HEAD:  # one query head per item; dK and dV go to its rows of a workspace
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
    return n, b, hk, h0, n_heads, dkv_head


@gluon.jit
def _item_count(schedule, CAUSAL: gl.constexpr, PERSISTENT: gl.constexpr):
    """How many work items this program takes (``schedule``: see the kernel)."""
    first, stride, items, _, _, _, table = schedule
    if not PERSISTENT:  # the ticket's item
        count = 1
    elif CAUSAL:  # its list in the causal_backward_schedule table
        count = gl.load(table + first + 1) - gl.load(table + first)
    else:  # items first, first + stride, ...
        count = gl.cdiv(items - first, stride)
    return count


@gluon.jit
def _item_at(t, schedule, CAUSAL: gl.constexpr, PERSISTENT: gl.constexpr, PER_QUERY_HEAD: gl.constexpr):
    """This program's ``t``-th work item, located by :func:`_item`. Its per-item barriers' phase is ``t & 1``."""
    first, stride, _, heads, group, key_tiles, table = schedule
    if not PERSISTENT:
        item = first
    elif CAUSAL:
        item = gl.load(table + gl.load(table + first) + t)
    else:
        item = first + t * stride
    return _item(item, heads, group, key_tiles, PER_QUERY_HEAD)


@gluon.jit
def _loader(
    loader_args,
    schedule,
    CAUSAL: gl.constexpr,
    PERSISTENT: gl.constexpr,
    PER_QUERY_HEAD: gl.constexpr,
    HEAD_DIM: gl.constexpr,
):
    """This program's work items (``schedule``, see the kernel), each by :func:`_load_item`."""
    it = 0
    for t in range(_item_count(schedule, CAUSAL, PERSISTENT)):
        where = _item_at(t, schedule, CAUSAL, PERSISTENT, PER_QUERY_HEAD)
        it = _load_item(loader_args, where, t & 1, it, CAUSAL, HEAD_DIM)


@gluon.jit
def _load_item(loader_args, where, phase, it, CAUSAL: gl.constexpr, HEAD_DIM: gl.constexpr):
    """The work item at ``where`` (:func:`_item`'s tuple): its K and V once the consumers have released the
    previous item's (``phase``: the parity of the program's items before it), then Q, dO, L and Delta of each
    query tile it visits into the ring, from ring step ``it`` on. Returns the ring step after the item's."""
    (
        q_desc,
        k_desc,
        v_desc,
        do_desc,
        row_stats_desc,
        q_smem,
        do_smem,
        k_smem,
        v_smem,
        ld_smem,
        kv_bar,
        kv_empty,
        q_ready,
        q_empty,
        heads,
        q_tiles,
        key_tiles,
    ) = loader_args
    BLOCK_M: gl.constexpr = block_m(HEAD_DIM)
    BLOCK_N: gl.constexpr = block_n(HEAD_DIM)
    RATIO: gl.constexpr = BLOCK_N // BLOCK_M
    STAGES: gl.constexpr = stages(HEAD_DIM)
    n, b, hk, h0, n_heads, _ = where
    mbarrier.wait(kv_empty, phase ^ 1)  # the previous item's are read (causal) or written out
    mbarrier.expect(kv_bar, 2 * BLOCK_N * HEAD_DIM * 2)  # K and V, 2 bytes per element
    kv_block = [b, hk, n * BLOCK_N, 0]
    tma_load(k_desc, kv_block, kv_bar, k_smem.reshape([1, 1, BLOCK_N, HEAD_DIM]))
    tma_load(v_desc, kv_block, kv_bar, v_smem.reshape([1, 1, BLOCK_N, HEAD_DIM]))
    steps = _steps(n, q_tiles, key_tiles, CAUSAL, RATIO)
    for g in range(n_heads):
        hq = h0 + g
        for s in range(steps):
            j = _query_tile(n, s, key_tiles, CAUSAL, RATIO)
            if j < q_tiles:
                slot = it % STAGES
                mbarrier.wait(q_empty.index(slot), ((it // STAGES) & 1) ^ 1)
                # Q and dO tiles (2 bytes per element), L and Delta (fp32)
                mbarrier.expect(q_ready.index(slot), 2 * BLOCK_M * HEAD_DIM * 2 + 2 * BLOCK_M * 4)
                tile_stats = ((b * heads + hq) * q_tiles + j) * 2 * BLOCK_M
                # L, then Delta, as two copies: one copy of both took 1.015x the kernel's time at head dim 64
                # causal, 1.00x at 128 (benchmarks/NOTES.md, v154)
                for which in gl.static_range(2):
                    tma_load(
                        row_stats_desc,
                        [tile_stats + which * BLOCK_M],
                        q_ready.index(slot),
                        ld_smem.index(slot).slice(which * BLOCK_M, BLOCK_M),
                    )
                tma_load(
                    q_desc,
                    [b, hq, j * BLOCK_M, 0],
                    q_ready.index(slot),
                    q_smem.index(slot).reshape([1, 1, BLOCK_M, HEAD_DIM]),
                )
                tma_load(
                    do_desc,
                    [b, hq, j * BLOCK_M, 0],
                    q_ready.index(slot),
                    do_smem.index(slot).reshape([1, 1, BLOCK_M, HEAD_DIM]),
                )
                it += 1
    return it


@gluon.jit
def _dq_writer(
    writer_args,
    schedule,
    CAUSAL: gl.constexpr,
    PERSISTENT: gl.constexpr,
    PER_QUERY_HEAD: gl.constexpr,
    WRITER: gl.constexpr,
    HEAD_DIM: gl.constexpr,
):
    """This program's work items (``schedule``, see the kernel), each by :func:`_write_item`."""
    it = 0
    for t in range(_item_count(schedule, CAUSAL, PERSISTENT)):
        where = _item_at(t, schedule, CAUSAL, PERSISTENT, PER_QUERY_HEAD)
        it = _write_item(writer_args, where, it, CAUSAL, WRITER, HEAD_DIM)


@gluon.jit
def _write_item(writer_args, where, it, CAUSAL: gl.constexpr, WRITER: gl.constexpr, HEAD_DIM: gl.constexpr):
    """Writer ``WRITER`` of two, the work item at ``where`` (:func:`_item`'s tuple): adds the dQ tiles of the
    steps whose buffer it owns (every other step; every step for the first writer at head dim 256, none for the
    second), from step ``it`` of the program's walk on, each in its turn on the query tile (the first in the
    order stores). Returns the step after the item's. ``writer_args``: the kernel's run-time arguments, named
    where unpacked."""
    (
        dq_desc,
        dq_smem,
        dq_full,
        dq_empty,
        counters,
        heads,
        q_tiles,
        key_tiles,
    ) = writer_args
    BLOCK_M: gl.constexpr = block_m(HEAD_DIM)
    RATIO: gl.constexpr = block_n(HEAD_DIM) // BLOCK_M
    BUFFERS: gl.constexpr = dq_buffers(HEAD_DIM)
    PIECES: gl.constexpr = dq_smem.shape[0] // BUFFERS
    n, b, _, h0, n_heads, _ = where
    steps = _steps(n, q_tiles, key_tiles, CAUSAL, RATIO)
    for g in range(n_heads):
        hq = h0 + g
        for s in range(steps):
            j = _query_tile(n, s, key_tiles, CAUSAL, RATIO)
            if j < q_tiles:
                if it % BUFFERS == WRITER:
                    buf = WRITER  # each writer owns one of the dQ buffers
                    mbarrier.wait(dq_full.index(buf), (it // BUFFERS) & 1)
                    # The key tiles that visit tile j before this one (one every RATIO steps
                    # of the walk) have each counted one completed write.
                    counter = counters + (b * heads + hq) * q_tiles + j
                    turn = s // RATIO
                    done = gl.atomic_add(counter, 0, sem="acquire", scope="gpu")
                    while done < turn:
                        done = gl.atomic_add(counter, 0, sem="acquire", scope="gpu")
                    _ptx("fence.proxy.async.global;")  # the earlier adds, seen by this warp, reach the TMA unit
                    fence_async_shared()  # the consumers' dQ stores, seen through dq_full, reach the TMA unit
                    for p in gl.static_range(PIECES):  # the consumer warpgroups' pieces
                        coord = [b, hq, j * BLOCK_M + _dq_row(p, HEAD_DIM), _dq_col(p, HEAD_DIM)]
                        src = dq_smem.index(PIECES * buf + p).reshape([1, 1, SUB_M, DQ_COLS])
                        if turn == 0:
                            tma_store(dq_desc, coord, src)
                        else:
                            _tma_reduce_add(dq_desc, coord, src)
                    if BUFFERS == 1:
                        # the only buffer is handed back once the TMA unit has read it, while the adds complete
                        _ptx("cp.async.bulk.commit_group; cp.async.bulk.wait_group.read 0;")
                        mbarrier.arrive(dq_empty.index(buf))
                        _ptx("cp.async.bulk.wait_group 0;")  # the write has completed
                    else:
                        _ptx("cp.async.bulk.commit_group; cp.async.bulk.wait_group 0;")  # the write has completed
                    # A causal tile's last add is key tile 0's: the causal epilogue reads the finished tile with
                    # ordinary loads, so the TMA unit's writes are made visible to them.
                    if CAUSAL:  # noqa: SIM102 (a branch at compile time around one at run time)
                        if n == 0:
                            _ptx("fence.proxy.async.global;")
                    gl.atomic_add(counter, 1, sem="release", scope="gpu")
                    if BUFFERS == 2:
                        mbarrier.arrive(dq_empty.index(buf))
                it += 1
    return it


@gluon.jit
def _store_dk_dv_from_registers(
    dk, dv, dk_ptr, dv_ptr, b, head, first_key, first_col, n_ctx, stride_b, stride_h, stride_n
):
    """Rows ``[first_key, +KEYS)``, columns ``[first_col, +COLS)`` of dk and dv (batch ``b``, head ``head``; rows
    past ``n_ctx`` skipped) = dK and dV (KEYS x COLS fp32 in the products' register layout)."""
    layout: gl.constexpr = dk.type.layout
    rows = first_key + gl.arange(0, dk.shape[0], layout=gl.SliceLayout(1, layout))
    cols = first_col + gl.arange(0, dk.shape[1], layout=gl.SliceLayout(0, layout))
    offs = b * stride_b + head * stride_h + rows[:, None] * stride_n + cols[None, :]
    mask = (rows < n_ctx)[:, None]
    gl.store(dk_ptr + offs, dk.to(dk_ptr.dtype.element_ty), mask=mask)
    gl.store(dv_ptr + offs, dv.to(dv_ptr.dtype.element_ty), mask=mask)


@gluon.jit
def _store_dk_dv_by_tma(
    dk, dv, k_smem, v_smem, kv_done, phase, dk_desc, dv_desc, b, head, first_key, WARPGROUP: gl.constexpr
):
    """dK and dV (KEYS x D fp32 in the products' register layout) into consumer ``WARPGROUP``'s rows of the K and V
    buffers, then to rows ``[first_key, +KEYS)`` of dk and dv (batch ``b``, head ``head``) by TMA, which clips rows
    past the sequence's end (stored from registers, an instruction writes 16 bytes of each of 8 rows: NOTES v85).
    V's rows are read only by this warpgroup's products; K's also by the other's dQ products, hence ``kv_done``
    (phase ``phase``). Returns once the buffers' rows have been read."""
    KEYS: gl.constexpr = dk.shape[0]
    BLOCKS: gl.constexpr = dk.shape[1] // SWIZZLE_COLS
    mbarrier.arrive(kv_done)
    v_smem.slice(WARPGROUP * KEYS, KEYS).store(dv.to(v_smem.dtype))
    mbarrier.wait(kv_done, phase)
    k_smem.slice(WARPGROUP * KEYS, KEYS).store(dk.to(k_smem.dtype))
    fence_async_shared()
    # A 128-byte-swizzled buffer is laid out as its column blocks one after another, each of all its rows.
    block_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    k_blocks = reinterpret(k_smem, k_smem.dtype, [2 * BLOCKS, KEYS, SWIZZLE_COLS], block_layout)
    v_blocks = reinterpret(v_smem, v_smem.dtype, [2 * BLOCKS, KEYS, SWIZZLE_COLS], block_layout)
    box: gl.constexpr = [1, 1, KEYS, SWIZZLE_COLS]
    for c in gl.static_range(BLOCKS):
        coord = [b, head, first_key, c * SWIZZLE_COLS]
        tma_store(dk_desc, coord, k_blocks.index(2 * c + WARPGROUP).reshape(box))
        tma_store(dv_desc, coord, v_blocks.index(2 * c + WARPGROUP).reshape(box))
    tma.store_wait(0)


@gluon.jit
def _consumer(
    consumer_args,
    schedule,
    CAUSAL: gl.constexpr,
    PERSISTENT: gl.constexpr,
    PER_QUERY_HEAD: gl.constexpr,
    RAGGED: gl.constexpr,
    DS_T_IN_REGISTERS: gl.constexpr,
    WARPGROUP: gl.constexpr,
    HEAD_DIM: gl.constexpr,
):
    """This program's work items (``schedule``, see the kernel), each by :func:`_consume_item`."""
    it = 0
    for t in range(_item_count(schedule, CAUSAL, PERSISTENT)):
        where = _item_at(t, schedule, CAUSAL, PERSISTENT, PER_QUERY_HEAD)
        if HEAD_DIM == 256:
            it = _consume_item_halves(consumer_args, where, t & 1, it, CAUSAL, RAGGED, WARPGROUP, HEAD_DIM)
        else:
            it = _consume_item(consumer_args, where, t & 1, it, CAUSAL, RAGGED, DS_T_IN_REGISTERS, WARPGROUP, HEAD_DIM)


@gluon.jit
def _consume_item(
    consumer_args,
    where,
    phase,
    it,
    CAUSAL: gl.constexpr,
    RAGGED: gl.constexpr,
    DS_T_IN_REGISTERS: gl.constexpr,
    WARPGROUP: gl.constexpr,
    HEAD_DIM: gl.constexpr,
):
    """The work item at ``where`` (:func:`_item`'s tuple), head dim 64 or 128: keys
    ``[n * BLOCK_N + 64 * WARPGROUP, +64)`` of its key tile ``n`` for dK, dV; the dQ piece at ``_dq_row``,
    ``_dq_col`` of each visited query tile, from step ``it`` of the program's walk on (``phase``: the parity of
    the program's items before this one), each step by :func:`_consume_step`. Returns the step after the item's.
    ``consumer_args``: the kernel's run-time arguments, named where unpacked."""
    (
        q_smem,
        do_smem,
        k_smem,
        v_smem,
        ds_smem,
        _pt_smem,
        dq_smem,
        ld_smem,
        kv_bar,
        kv_empty,
        kv_done,
        q_ready,
        q_empty,
        ds_ready,
        ds_free,
        dq_full,
        dq_empty,
        dk_ptr,
        dv_ptr,
        dk_desc,
        dv_desc,
        n_ctx,
        q_tiles,
        key_tiles,
        qk_scale_log2,
        softmax_scale,
        stride_dkb,
        stride_dkh,
        stride_dkn,
    ) = consumer_args
    BLOCK_N: gl.constexpr = block_n(HEAD_DIM)
    RATIO: gl.constexpr = BLOCK_N // block_m(HEAD_DIM)
    KEYS: gl.constexpr = BLOCK_N // 2  # each of the two consumer warpgroups
    st_layout: gl.constexpr = accumulator_layout(SUB_M)
    kv_layout: gl.constexpr = accumulator_layout(HEAD_DIM)
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=kv_layout, k_width=2)
    row_layout: gl.constexpr = gl.SliceLayout(1, st_layout)

    k_mine = k_smem.slice(WARPGROUP * KEYS, KEYS)
    v_mine = v_smem.slice(WARPGROUP * KEYS, KEYS)
    k_dq = _part(k_smem, _dq_col(WARPGROUP, HEAD_DIM) // DQ_COLS, DQ_COLS, 1)  # B of this piece's dQ
    n, b, _, _, n_heads, dkv_head = where
    dk = warpgroup_mma_init(gl.zeros([KEYS, HEAD_DIM], gl.float32, kv_layout))
    dv = warpgroup_mma_init(gl.zeros([KEYS, HEAD_DIM], gl.float32, kv_layout))
    keys = n * BLOCK_N + WARPGROUP * KEYS + gl.arange(0, KEYS, layout=row_layout)
    key_ok = keys < n_ctx
    steps = _steps(n, q_tiles, key_tiles, CAUSAL, RATIO)
    mbarrier.wait(kv_bar, phase)
    # At head dim 64, S^T's and dP^T's A operands (this warpgroup's K and V rows, 16 registers a thread each) are
    # read into registers once per item rather than from shared memory by every step's products: 0.96-0.99x the
    # backward's time at eight shapes (benchmarks/NOTES.md, v170). At 128 they would take 64 registers where the
    # consumers already spill.
    if HEAD_DIM == 64 and REGISTER_OPERANDS:
        k_a = k_mine.load(a_layout)
        v_a = v_mine.load(a_layout)
    else:
        k_a = k_mine
        v_a = v_mine
    step_args = (q_smem, do_smem, ds_smem, dq_smem, ld_smem, q_ready, q_empty, ds_ready, ds_free, dq_full, dq_empty)
    step_args += (k_a, v_a, k_dq, keys, key_ok, n, n_ctx, q_tiles, qk_scale_log2, softmax_scale)
    for _head in range(n_heads):  # the query heads this program walks
        # Causal at head dim 64: the diagonal's query tile with the mask, then the rest without it; at 128 one
        # loop, the mask a run-time branch, as measured (benchmarks/NOTES.md, v180). One dS fence per step
        # (0.99-1.00x the backward's time, v184) but on the long walks' diagonal and in causal walks at 128.
        ds_t_unmasked: gl.constexpr = DS_T_REGISTERS if DS_T_IN_REGISTERS else DS_T_SHARED
        if CAUSAL and HEAD_DIM == 64:
            ds_t_diagonal: gl.constexpr = DS_T_SHARED_PER_PART if DS_T_IN_REGISTERS else DS_T_SHARED
            for s in range(RATIO):
                it, dk, dv = _consume_step(step_args, RATIO * n + s, it, dk, dv, True, ds_t_diagonal, RAGGED, WARPGROUP)
            for s in range(RATIO, steps):
                it, dk, dv = _consume_step(
                    step_args, RATIO * n + s, it, dk, dv, False, ds_t_unmasked, RAGGED, WARPGROUP
                )
        else:
            ds_t: gl.constexpr = DS_T_SHARED_PER_PART if CAUSAL else ds_t_unmasked
            for s in range(steps):
                j = _query_tile(n, s, key_tiles, CAUSAL, RATIO)
                masked = CAUSAL and s < RATIO  # the diagonal's query tiles
                it, dk, dv = _consume_step(step_args, j, it, dk, dv, masked, ds_t, RAGGED, WARPGROUP)
    dk = warpgroup_mma_wait(num_outstanding=0, deps=(dk,))
    dv = warpgroup_mma_wait(num_outstanding=0, deps=(dv,))
    first_key = n * BLOCK_N + WARPGROUP * KEYS
    if CAUSAL:  # dK and dV from registers, once the products have read K and V
        mbarrier.arrive(kv_empty)  # the next item's K and V may replace them
        _store_dk_dv_from_registers(
            dk * softmax_scale, dv, dk_ptr, dv_ptr, b, dkv_head, first_key, 0, n_ctx, stride_dkb, stride_dkh, stride_dkn
        )
    else:
        _store_dk_dv_by_tma(
            dk * softmax_scale, dv, k_smem, v_smem, kv_done, phase, dk_desc, dv_desc, b, dkv_head, first_key, WARPGROUP
        )
        mbarrier.arrive(kv_empty)  # the next item's K and V may replace them
    return it


@gluon.jit
def _consume_step(
    step_args,
    j,
    it,
    dk,
    dv,
    masked,
    DS_T: gl.constexpr,
    RAGGED: gl.constexpr,
    WARPGROUP: gl.constexpr,
):
    """Step ``it`` of the program's walk, for :func:`_consume_item`: query tile ``j`` against this warpgroup's
    keys of the item. Adds the tile's share to dV and dK (fp32, ``(KEYS, HEAD_DIM)``, returned with their
    products in flight) and hands this warpgroup's dQ piece to the writers. ``masked``: the tile crosses the
    diagonal (a compile-time or a run-time bool). DS_T: where dK's A operand dS^T comes from,
    :data:`DS_T_REGISTERS`, :data:`DS_T_SHARED` (both parts' dS stores under one fence, then both dK products) or
    :data:`DS_T_SHARED_PER_PART` (a fence and a dK product after each part's store). Returns ``(it + 1, dk, dv)``,
    or ``(it, dk, dv)`` where ``j`` is past the last query tile."""
    q_smem, do_smem, ds_smem, dq_smem, ld_smem, q_ready, q_empty, ds_ready, ds_free, dq_full, dq_empty = step_args[:11]
    k_a, v_a, k_dq, keys, key_ok, n, n_ctx, q_tiles, qk_scale_log2, softmax_scale = step_args[11:]
    HEAD_DIM: gl.constexpr = q_smem.shape[2]
    BLOCK_M: gl.constexpr = block_m(HEAD_DIM)
    BLOCK_N: gl.constexpr = block_n(HEAD_DIM)
    STAGES: gl.constexpr = stages(HEAD_DIM)
    KEYS: gl.constexpr = BLOCK_N // 2
    st_layout: gl.constexpr = accumulator_layout(SUB_M)
    kv_layout: gl.constexpr = accumulator_layout(HEAD_DIM)
    dq_layout: gl.constexpr = accumulator_layout(DQ_COLS)
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=kv_layout, k_width=2)
    col_layout: gl.constexpr = gl.SliceLayout(0, st_layout)
    # L and Delta of SUB_M queries read from shared memory where they are used (after the products they wait
    # for) rather than before: at head dim 128 they would otherwise hold 32 registers across S^T and dP^T and
    # spill; at 64, reading them early keeps the shared-memory latency off the critical path.
    LATE_ROW_LOADS: gl.constexpr = HEAD_DIM > 64
    zero_st = gl.zeros([KEYS, SUB_M], gl.float32, st_layout)
    zero_dq = gl.zeros([SUB_M, DQ_COLS], gl.float32, dq_layout)
    offs_col = gl.arange(0, SUB_M, layout=col_layout)
    if j < q_tiles:
        slot = it % STAGES
        mbarrier.wait(q_ready.index(slot), (it // STAGES) & 1)
        for h in gl.static_range(BLOCK_M // SUB_M):  # the tile's SUB_M-query parts
            q_h = _part(q_smem.index(slot), h, SUB_M, 0)
            do_h = _part(do_smem.index(slot), h, SUB_M, 0)
            queries = j * BLOCK_M + h * SUB_M + offs_col
            if not LATE_ROW_LOADS:
                lse2 = _tile_rows(ld_smem, slot, 0, h, col_layout)
                delta = _tile_rows(ld_smem, slot, 1, h, col_layout)
            # S^T and dP^T (keys x queries), issued back to back
            st = warpgroup_mma(k_a, q_h.permute((1, 0)), zero_st, use_acc=False, is_async=True)
            dpt = warpgroup_mma(v_a, do_h.permute((1, 0)), zero_st, use_acc=False, is_async=True)
            st = warpgroup_mma_wait(num_outstanding=1, deps=(st,))
            if LATE_ROW_LOADS:
                lse2 = _tile_rows(ld_smem, slot, 0, h, col_layout)
            pt = gl.exp2(st * qk_scale_log2 - lse2[None, :])
            # Masked after the exponent: a score of -inf times a negative scale would be +inf.
            if masked:
                pt = gl.where(keys[:, None] <= queries[None, :], pt, 0.0)
            # Compiled only where N is not a multiple of BLOCK_N: as a run-time branch alone, ptxas
            # predicates the loop around it (benchmarks/NOTES.md, v86).
            if RAGGED:  # noqa: SIM102 (a branch at compile time around one at run time)
                if (n + 1) * BLOCK_N > n_ctx:  # the ragged last key tile
                    pt = gl.where(key_ok[:, None], pt, 0.0)
            pt_a = gl.convert_layout(pt.to(ds_smem.dtype), a_layout)
            dpt = warpgroup_mma_wait(num_outstanding=0, deps=(dpt,))
            if LATE_ROW_LOADS:
                delta = _tile_rows(ld_smem, slot, 1, h, col_layout)
            dst = (pt * (dpt - delta[None, :])).to(ds_smem.dtype)
            if h == 0:
                mbarrier.wait(ds_free.index(slot), ((it // STAGES) & 1) ^ 1)
            ds_h = _warpgroup_ds_part(ds_smem, slot, h, WARPGROUP)
            ds_h.store(dst)
            if DS_T == DS_T_SHARED_PER_PART:  # dK's product reads these rows from the buffer next
                fence_async_shared()
            dv = warpgroup_mma(pt_a, do_h, dv, is_async=True)
            if DS_T == DS_T_REGISTERS:
                dk = warpgroup_mma(gl.convert_layout(dst, a_layout), q_h, dk, is_async=True)
            elif DS_T == DS_T_SHARED_PER_PART:
                dk = warpgroup_mma(ds_h, q_h, dk, is_async=True)
        if DS_T != DS_T_SHARED_PER_PART:  # one fence for both parts' stores
            fence_async_shared()
        if DS_T == DS_T_SHARED:  # dK's products read dS^T from the buffer, after the fence
            for h in gl.static_range(BLOCK_M // SUB_M):
                q_h = _part(q_smem.index(slot), h, SUB_M, 0)
                dk = warpgroup_mma(_warpgroup_ds_part(ds_smem, slot, h, WARPGROUP), q_h, dk, is_async=True)
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
    return it, dk, dv


@gluon.jit
def _consume_item_halves(
    consumer_args,
    where,
    phase,
    it,
    CAUSAL: gl.constexpr,
    RAGGED: gl.constexpr,
    WARPGROUP: gl.constexpr,
    HEAD_DIM: gl.constexpr,
):
    """The work item at ``where`` (:func:`_item`'s tuple), head dim 256: columns
    ``[WARPGROUP * HEAD_DIM / 2, +HEAD_DIM / 2)`` of dK and dV of the 64 keys of its key tile ``n``. Per 64-query
    tile, this warpgroup computes S and dP (queries x keys) for its 32 of the keys, and the two warpgroups share P
    and dS through shared memory (as ``P^T`` and ``dS^T``); then dV and dK of its columns over all 64 keys, and two
    DQ_COLS-column pieces of dQ, from step ``it`` of the program's walk on (``phase``: the parity of the
    program's items before this one). Returns the step after the item's. ``consumer_args``: the kernel's run-time
    arguments, named where unpacked."""
    (
        q_smem,
        do_smem,
        k_smem,
        v_smem,
        ds_smem,
        pt_smem,
        dq_smem,
        ld_smem,
        kv_bar,
        kv_empty,
        _kv_done,
        q_ready,
        q_empty,
        ds_ready,
        ds_free,
        dq_full,
        dq_empty,
        dk_ptr,
        dv_ptr,
        _dk_desc,
        _dv_desc,
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
    BLOCK_N: gl.constexpr = block_n(HEAD_DIM)
    RATIO: gl.constexpr = BLOCK_N // BLOCK_M
    HALF: gl.constexpr = BLOCK_N // 2  # this warpgroup's keys of S and dP
    COLS: gl.constexpr = HEAD_DIM // 2  # its columns of dK, dV and dQ
    s_layout: gl.constexpr = accumulator_layout(HALF)
    kv_layout: gl.constexpr = accumulator_layout(COLS)
    dq_layout: gl.constexpr = accumulator_layout(DQ_COLS)
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    col_layout: gl.constexpr = gl.SliceLayout(0, s_layout)

    zero_s = gl.zeros([BLOCK_M, HALF], gl.float32, s_layout)
    zero_dq = gl.zeros([SUB_M, DQ_COLS], gl.float32, dq_layout)
    offs_row = gl.arange(0, BLOCK_M, layout=row_layout)
    n, b, _, _, n_heads, dkv_head = where
    dk = warpgroup_mma_init(gl.zeros([BLOCK_N, COLS], gl.float32, kv_layout))
    dv = warpgroup_mma_init(gl.zeros([BLOCK_N, COLS], gl.float32, kv_layout))
    keys = n * BLOCK_N + WARPGROUP * HALF + gl.arange(0, HALF, layout=col_layout)
    key_ok = keys < n_ctx
    steps = _steps(n, q_tiles, key_tiles, CAUSAL, RATIO)
    mbarrier.wait(kv_bar, phase)
    for _head in range(n_heads):  # the query heads this program walks
        for s in range(steps):
            j = _query_tile(n, s, key_tiles, CAUSAL, RATIO)
            if j < q_tiles:
                ring = it & 1  # the phase of the one-slot ring and of the one dQ buffer
                mbarrier.wait(q_ready.index(0), ring)
                # The buffers of this step's products, addressed in the loop (zero_at_run_time)
                zero = zero_at_run_time(it)
                q_t = q_smem.index(zero)
                do_t = do_smem.index(zero)
                k_t = one_of(k_smem).index(zero)
                v_t = one_of(v_smem).index(zero)
                dst = ds_smem.index(zero)  # dS^T (keys x queries)
                pt = one_of(pt_smem).index(zero)  # P^T
                # S and dP (queries x its keys), issued back to back
                k_half = k_t.slice(WARPGROUP * HALF, HALF)
                v_half = v_t.slice(WARPGROUP * HALF, HALF)
                st = warpgroup_mma(q_t, k_half.permute((1, 0)), zero_s, use_acc=False, is_async=True)
                dpt = warpgroup_mma(do_t, v_half.permute((1, 0)), zero_s, use_acc=False, is_async=True)
                queries = j * BLOCK_M + offs_row
                lse2 = _tile_rows(ld_smem, 0, 0, 0, row_layout)
                st = warpgroup_mma_wait(num_outstanding=1, deps=(st,))
                p = gl.exp2(st * qk_scale_log2 - lse2[:, None])
                # Masked after the exponent: a score of -inf times a negative scale would be +inf.
                if CAUSAL:  # noqa: SIM102 (a branch at compile time around one at run time)
                    if s < RATIO:  # the diagonal's query tile
                        p = gl.where(keys[None, :] <= queries[:, None], p, 0.0)
                if RAGGED:  # noqa: SIM102 (a branch at compile time around one at run time)
                    if (n + 1) * BLOCK_N > n_ctx:  # the ragged last key tile
                        p = gl.where(key_ok[None, :], p, 0.0)
                delta = _tile_rows(ld_smem, 0, 1, 0, row_layout)
                dpt = warpgroup_mma_wait(num_outstanding=0, deps=(dpt,))
                ds = p * (dpt - delta[:, None])
                mbarrier.wait(ds_free.index(0), ring ^ 1)  # both warpgroups' last products have read them
                pt.slice(WARPGROUP * HALF, HALF).store(gl.permute(p.to(pt.dtype), (1, 0)))  # its keys' rows
                dst.slice(WARPGROUP * HALF, HALF).store(gl.permute(ds.to(dst.dtype), (1, 0)))
                fence_async_shared()
                # dV, dK and dQ need both warpgroups' P and dS: meet on the buffers
                mbarrier.arrive(ds_ready.index(0))
                mbarrier.wait(ds_ready.index(0), ring)
                # dV, dK and two DQ_COLS-column pieces of dQ (dS K), for its columns
                dv = warpgroup_mma(pt, do_t.slice(WARPGROUP * COLS, COLS, dim=1), dv, is_async=True)
                dk = warpgroup_mma(dst, q_t.slice(WARPGROUP * COLS, COLS, dim=1), dk, is_async=True)
                ds_a = dst.permute((1, 0))
                k_dq0 = k_t.slice(WARPGROUP * COLS, DQ_COLS, dim=1)
                k_dq1 = k_t.slice(WARPGROUP * COLS + DQ_COLS, DQ_COLS, dim=1)
                dq0 = warpgroup_mma(ds_a, k_dq0, zero_dq, use_acc=False, is_async=True)
                dq1 = warpgroup_mma(ds_a, k_dq1, zero_dq, use_acc=False, is_async=True)
                # dV and dK have read Q and dO: the next tile's load while the dQ products run
                dq0, dq1 = warpgroup_mma_wait(num_outstanding=2, deps=(dq0, dq1))  # all but the last two products
                mbarrier.arrive(q_empty.index(0))
                dq0, dq1 = warpgroup_mma_wait(num_outstanding=0, deps=(dq0, dq1))
                mbarrier.arrive(ds_free.index(0))
                mbarrier.wait(dq_empty.index(0), ring ^ 1)
                # the writer fences these stores for the TMA unit once dq_full says they are done
                dq_smem.index(2 * WARPGROUP).store(dq0 * softmax_scale)
                dq_smem.index(2 * WARPGROUP + 1).store(dq1 * softmax_scale)
                mbarrier.arrive(dq_full.index(0))
                it += 1
    dk = warpgroup_mma_wait(num_outstanding=0, deps=(dk,))
    dv = warpgroup_mma_wait(num_outstanding=0, deps=(dv,))
    mbarrier.arrive(kv_empty)  # the next item's K and V may replace them
    _store_dk_dv_from_registers(
        dk * softmax_scale,
        dv,
        dk_ptr,
        dv_ptr,
        b,
        dkv_head,
        n * BLOCK_N,
        WARPGROUP * COLS,
        n_ctx,
        stride_dkb,
        stride_dkh,
        stride_dkn,
    )
    return it


@gluon.jit
def _hopper_backward_kernel(
    q_desc,
    k_desc,
    v_desc,
    do_desc,
    dq_desc,
    row_stats_desc,
    dk_ptr,
    dv_ptr,
    dk_desc,
    dv_desc,
    counters,
    ticket,
    table,
    items,
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
    PERSISTENT: gl.constexpr,
    HEAD_DIM: gl.constexpr,
    PER_QUERY_HEAD: gl.constexpr,
    RAGGED: gl.constexpr,
    DS_T_IN_REGISTERS: gl.constexpr,
):
    # A work item is a key tile of a (batch, k/v head), or of a (batch, query head) with PER_QUERY_HEAD; items
    # are numbered by (batch, head) and then by key tile descending.
    if CAUSAL:
        # the causal dq epilogue, this kernel's programmatic dependent, may start once every program has
        _ptx("griddepcontrol.launch_dependents;")
    if PERSISTENT:  # noqa: SIM108 (a branch at compile time)
        # Causal: program p takes its list of ``table`` (int32, from causal_backward_schedule: items dealt in an
        # order in which each waits only on earlier items, of programs that reach them first). Non-causal: items
        # p, p + grid, ...; a head's key tiles wait on each other (the walk wraps around) and are consecutive
        # items, so with at least as many programs as key tiles they run on distinct programs, all resident at once.
        first = gl.program_id(0)
    else:
        # Causal, one item per program, in the order programs start: a program only waits on started ones.
        first = gl.atomic_add(ticket, 1)
    schedule = (first, gl.num_programs(0), items, heads, group, key_tiles, table)
    BLOCK_M: gl.constexpr = block_m(HEAD_DIM)
    BLOCK_N: gl.constexpr = block_n(HEAD_DIM)
    STAGES: gl.constexpr = stages(HEAD_DIM)

    dtype: gl.constexpr = q_desc.dtype
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    k_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], kv_layout)
    v_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], kv_layout)
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    q_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_DIM], q_layout)
    do_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_DIM], q_layout)
    ds_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_M], dtype)
    ds_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, BLOCK_M], ds_layout)
    if HEAD_DIM == 256:  # noqa: SIM108 (a branch at compile time) P^T, shared like dS^T (_consume_item_halves)
        pt_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, BLOCK_M], ds_layout)
    else:  # each consumer keeps its P^T in registers
        pt_smem = ds_smem
    # dq_buffers(HEAD_DIM) buffers of the consumer warpgroups' pieces; the 128-byte swizzle of dq_desc's blocks
    dq_smem = gl.allocate_shared_memory(
        gl.float32, [4, SUB_M, DQ_COLS], gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    )
    ld_smem = gl.allocate_shared_memory(  # per slot: L, then Delta
        gl.float32, [STAGES, 2 * BLOCK_M], gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1)
    )
    kv_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    kv_done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    q_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    ds_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    ds_free = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    dq_full = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    dq_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar, count=1)
    mbarrier.init(kv_empty, count=2)
    mbarrier.init(kv_done, count=2)
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
        pt_smem,
        dq_smem,
        ld_smem,
        kv_bar,
        kv_empty,
        kv_done,
        q_ready,
        q_empty,
        ds_ready,
        ds_free,
        dq_full,
        dq_empty,
        dk_ptr,
        dv_ptr,
        dk_desc,
        dv_desc,
        n_ctx,
        q_tiles,
        key_tiles,
        qk_scale_log2,
        softmax_scale,
        stride_dkb,
        stride_dkh,
        stride_dkn,
    )
    writer_args = (dq_desc, dq_smem, dq_full, dq_empty, counters, heads, q_tiles, key_tiles)
    loader_args = (
        q_desc,
        k_desc,
        v_desc,
        do_desc,
        row_stats_desc,
        q_smem,
        do_smem,
        k_smem,
        v_smem,
        ld_smem,
        kv_bar,
        kv_empty,
        q_ready,
        q_empty,
        heads,
        q_tiles,
        key_tiles,
    )
    gl.warp_specialize(
        [
            (
                _consumer,
                (consumer_args, schedule, CAUSAL, PERSISTENT, PER_QUERY_HEAD, RAGGED, DS_T_IN_REGISTERS, 0, HEAD_DIM),
            ),
            (
                _consumer,
                (consumer_args, schedule, CAUSAL, PERSISTENT, PER_QUERY_HEAD, RAGGED, DS_T_IN_REGISTERS, 1, HEAD_DIM),
            ),
            (_loader, (loader_args, schedule, CAUSAL, PERSISTENT, PER_QUERY_HEAD, HEAD_DIM)),
            (_dq_writer, (writer_args, schedule, CAUSAL, PERSISTENT, PER_QUERY_HEAD, 0, HEAD_DIM)),
            (_dq_writer, (writer_args, schedule, CAUSAL, PERSISTENT, PER_QUERY_HEAD, 1, HEAD_DIM)),
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
    lse,
    row_stats,
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
    """Program (query tile of BLOCK_M rows, batch * head): the tile's ``row_stats`` (fp32, ``(B * H * q_tiles, 2,
    BLOCK_M)``): the rows' logsumexp ``lse`` (fp32 ``(B * H * N)``, natural log) in the log2 domain, +inf past the
    sequence's end so that P is 0 there, and Delta = rowsum(O * dO), 0 past the end; and the tile's counter zeroed
    (and by the first program the ticket, ``counters[-1]``). Each tile's row statistics start at a multiple of
    2 * BLOCK_M elements, aligned for the kernel's TMA loads whatever N is."""
    tile, bh = tl.program_id(0), tl.program_id(1)
    b, h = bh // heads, bh % heads
    r = tl.arange(0, BLOCK_M)
    rows = tile * BLOCK_M + r
    cols = tl.arange(0, HEAD_DIM)
    ok = rows < n_ctx
    o = tl.load(out + b * stride_ob + h * stride_oh + rows[:, None] * stride_on + cols[None, :], ok[:, None], 0.0)
    do = tl.load(grad_out + b * stride_gb + h * stride_gh + rows[:, None] * stride_gn + cols[None, :], ok[:, None], 0.0)
    lse2 = tl.load(lse + bh * n_ctx + rows, mask=ok, other=float("inf")) * LOG2_E_IN_KERNEL
    stats = row_stats + (bh * q_tiles + tile) * 2 * BLOCK_M + r
    tl.store(stats, lse2)
    tl.store(stats + BLOCK_M, tl.sum(o.to(tl.float32) * do.to(tl.float32), 1))
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
def _causal_epilogue_kernel(
    dq_acc, dq, counters, n_ctx, q_tiles, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr
):
    """Program (CAUSAL_EPILOGUE_ROWS rows, batch * head): dq (contiguous, its dtype) = the fp32 workspace, each
    query tile of BLOCK_M rows once its counter says that every key tile (of BLOCK_N keys) has added to it.

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


def _rows_tile(head_dim: int) -> Tile:
    """The prologue's, epilogues' and group sum's programs: 4 warps (8 at head dim 256, whose rows span twice the
    registers), no pipelining (the tile's rows are the kernels' constexprs; they span the head dimension)."""
    return Tile(SUM_ROWS.value, SUM_ROWS.value, 8 if head_dim == 256 else 4, 1)


# Where the kernel is faster than the Triton kernels (benchmarks/hopper_kernels.py, NOTES v35, v39, v40, v51, v96,
# v98), by (head dim, causal): pairs (fewest keys per sequence, fewest scores B x H x N^2); it runs where N and the
# scores reach both numbers of any pair (flashattn2._hopper.reaches).
# - Head dims 64 and 128, causal from 2048 keys with 2**26 scores: 0.77-0.89x their time at N = 2048 and above;
#   below 2**26 scores the host's time per call decides ((1, 8, 2048, 64) 1.17x). From 1024 keys with 2**28 scores:
#   0.94-0.95x at five head-dim-128 shapes, 0.88-0.89x at 1280 and 1536 keys, 0.93x at head dim 64 (CUDA-graph
#   replays, v124; 0.98x with 2**27.6 scores, and 1.01-1.12x with 2**27 in eager calls, v96). From 512 keys at head
#   dim 64 with 2**29 scores: 0.88-0.96x.
# - Non-causal (persistent) with 2**26 scores from 512 keys: 0.78-0.92x at twelve shapes of 512 to 2048 keys from
#   (16, 16, 512) and (4, 16, 1024) up, on an H100 and an H200. Below that, by the GPU's time (CUDA-graph replays,
#   v114; eager calls there read 0.84-1.83x as the host's speed allowed): head dim 64 from 1024 keys with 2**24
#   scores (0.89-0.94x at two shapes) and from 512 with 2**25 (0.95x; 2**24 there 1.06x), head dim 128 from 512
#   keys with 2**24 (0.85-0.97x at three shapes; 2**23 0.98-1.09x).
# - Head dim 256 (64-key items, v106), from 512 keys with 2**24 scores: 0.61-0.66x from 2048 keys causal, 0.70-0.72x
#   non-causal; 0.74-0.85x from 512 to 1024 keys (2**24 to 2**27 scores); fewer scores were not measured.
THRESHOLDS = {
    (64, True): ((2048, 2**26), (1024, 2**28), (512, 2**29)),
    (64, False): ((1024, 2**24), (512, 2**25)),
    (128, True): ((2048, 2**26), (1024, 2**28)),
    (128, False): ((512, 2**24),),
    (256, True): ((512, 2**24),),
    (256, False): ((512, 2**24),),
}
# Head dims whose causal programs are persistent (causal_backward_schedule) rather than one per item, on an H100: at
# 64 0.92-0.95x the time at 2048 and 4096 keys, 0.98-1.01x at 16384; at 128 0.99-1.04x (benchmarks/NOTES.md, v98);
# at 256 0.98-1.06x (v106). At 128 and 256 they are persistent only where their items are dealt interleaved.
PERSISTENT_CAUSAL_HEAD_DIMS = (64,)
# Bytes per element of a (batch, query head)'s data that every key tile's item reads again: Q and dO (2 bytes each)
# and the fp32 dQ workspace (4). K and V are read once per item, dK and dV written once.
REREAD_BYTES = 8
# The share of L2 those may take for the causal items to be dealt interleaved (causal_backward_schedule): on an
# H100 (50 MiB) interleaving took 0.88-0.97x the time with 16-40 MiB of them, 1.04-1.06x with 48 MiB and more
# (benchmarks/NOTES.md, v117).
INTERLEAVED_L2_SHARE = 0.75
# Interleaved dealing also needs this many keys per sequence and more items than programs. At head dims 128 and 256,
# where it then applies, persistent programs took 0.88-1.00x the one-item programs' time at twelve shapes of 2048 to
# 16384 keys; with 1024 keys 1.02-1.31x, and with no more items than programs 1.02x (benchmarks/NOTES.md, v119).
INTERLEAVED_MIN_KEYS = 2048


def causal_backward_schedule(
    items: int, key_tiles: int, q_tiles: int, ratio: int, programs: int, interleaved: bool
) -> list[int]:
    """The causal work items of persistent programs, as the kernel reads them (:func:`_hopper.deal_in_order`'s
    table of item numbers, numbered as :func:`_item` reads them). Items are dealt in an order in which each waits
    only on earlier ones: by (batch, head), key tile descending; or ``interleaved``, key tile descending with all
    (batch, head) pairs' items of one key tile together. Interleaved, the last pairs' longest walks no longer
    trail the launch, but the pairs' re-read data must share L2 (:data:`INTERLEAVED_L2_SHARE`). Key tile ``n``
    visits ``q_tiles - ratio * n`` query tiles, and costs one more for its K and V load and its dK and dV store."""
    units = items // key_tiles  # (batch, head) pairs, key_tiles items each; band 0 is the last key tile
    if interleaved:
        order = [unit * key_tiles + band for band in range(key_tiles) for unit in range(units)]
    else:
        order = list(range(items))
    costs = (q_tiles - ratio * (key_tiles - 1 - item % key_tiles) + 1 for item in order)
    table = _hopper.deal_in_order(costs, programs)
    return table[: programs + 1] + [order[position] for position in table[programs + 1 :]]


def hopper_backward_applies(q_shape, k_shape, tma_strides, dtype, device, causal: bool, aligned) -> bool:
    """Whether :class:`HopperBackward` runs this layout: :func:`flashattn2._hopper.layout_supported` (with
    ``tma_strides`` those of q, k, v and grad_out), and enough keys per sequence and scores in all for one of its
    (head dim, mask)'s :data:`THRESHOLDS`. A non-causal walk needs every key tile of a head resident at once: at
    most one key tile (128 keys, 64 at head dim 256) per multiprocessor this process may use (an MPS client's share,
    ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``). ``FLASHATTN2_HOPPER_BACKWARD=0`` turns it off."""
    if not _hopper.enabled("backward") or not _hopper.layout_supported(
        "backward", q_shape, k_shape, tma_strides, dtype, device, aligned
    ):
        return False
    n, head_dim = q_shape[2:]
    if not _hopper.reaches(THRESHOLDS[(head_dim, causal)], q_shape):
        return False
    return causal or triton.cdiv(n, block_n(head_dim)) <= _hopper.usable_multiprocessors(device)


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
        self.causal, self.device, self.dtype = causal, device, dtype
        self.block_m, keys_per_item = block_m(head_dim), block_n(head_dim)
        rows_tile = _rows_tile(head_dim)
        q_tiles, key_tiles = triton.cdiv(n, self.block_m), triton.cdiv(n, keys_per_item)
        acc_shape = (batch, heads, n, head_dim)
        counter_slots = batch * heads * q_tiles + 1  # one per (batch, head, query tile), and the ticket
        rows = batch * heads * n
        # each call's workspaces: L and Delta of each query tile (_prologue_kernel's row_stats), dQ in float32,
        # the counters, and for per_query_head dK and dV in float32
        self.new_row_stats = allocator((batch * heads * q_tiles, 2, self.block_m), torch.float32, device)
        self.new_dq_acc = allocator(acc_shape, torch.float32, device)
        self.new_counters = allocator((counter_slots,), torch.int32, device)
        self.new_dkv_acc = allocator((2, *acc_shape), torch.float32, device)
        # Causal with grouped-query heads: one program per (key tile, query head), each writing its dK and dV
        # to a workspace that group_sum adds up. A program walking the whole group would be that many times
        # longer, and descending tickets start each head's longest program last (0.89-0.94x the time at
        # three shapes, NOTES v44; non-causal walks are all equally long, and lost 11% this way).
        self.per_query_head = causal and kv_heads < heads
        self.items = key_tiles * batch * (heads if self.per_query_head else kv_heads)
        programs = _hopper.usable_multiprocessors(device)
        # causal items dealt interleaved where what they read again fits in L2 (NOTES v117, v119)
        reread = batch * heads * n * head_dim * REREAD_BYTES
        interleaved = (
            causal
            and n >= INTERLEAVED_MIN_KEYS
            and self.items > programs
            and _hopper.fits_in_l2(reread, INTERLEAVED_L2_SHARE, device)
        )
        # persistent (NOTES v86, v98): at most one program per multiprocessor, each taking items in turn
        persistent = not causal or head_dim in PERSISTENT_CAUSAL_HEAD_DIMS or interleaved
        self.grid = (min(self.items, programs) if persistent else self.items,)
        # causal persistent programs: their items (a device copy made by the first call)
        self.schedule_table = None
        if causal and persistent:
            self.schedule_table = causal_backward_schedule(
                self.items, key_tiles, q_tiles, keys_per_item // self.block_m, self.grid[0], interleaved
            )
        self.schedule_device = None
        self.group_sum = CompiledLaunch(
            _group_sum_kernel,
            (triton.cdiv(n, SUM_ROWS.value), batch * kv_heads, 1),
            (heads, heads // kv_heads, n),
            {"HEAD_DIM": head_dim},
            rows_tile,
            device,
        )
        # dK and dV go to the gradients (contiguous (B, Hkv, N, D)) or to the per-query-head workspaces
        dkv_heads = heads if self.per_query_head else kv_heads
        dkv_strides = (dkv_heads * n * head_dim, n * head_dim, head_dim)
        self.kernel = CompiledLaunch(
            _hopper_backward_kernel,
            (*self.grid, 1, 1),
            (
                self.items,
                heads,
                heads // kv_heads,
                n,
                q_tiles,
                key_tiles,
                softmax_scale * LOG2_E,
                softmax_scale,
                *dkv_strides,
            ),
            {
                "CAUSAL": causal,
                "PERSISTENT": persistent,
                "HEAD_DIM": head_dim,
                "PER_QUERY_HEAD": self.per_query_head,
                "RAGGED": n % keys_per_item != 0,
                "DS_T_IN_REGISTERS": ds_t_in_registers(head_dim, causal, n),
            },
            # the default partition's warps; Gluon kernels pipeline themselves (Triton's stage count is not read)
            Tile(self.block_m, keys_per_item, NUM_WARPS, 1),
            device,
        )
        self.prologue = CompiledLaunch(
            _prologue_kernel,
            (q_tiles, batch * heads, 1),
            (*out_stride[:3], *grad_stride[:3], heads, n, q_tiles),
            {"HEAD_DIM": head_dim, "BLOCK_M": self.block_m},
            rows_tile,
            device,
        )
        if causal:  # overlapping the kernel's tail (NOTES v62)
            self.epilogue = CompiledLaunch(
                _causal_epilogue_kernel,
                (triton.cdiv(q_tiles, CAUSAL_EPILOGUE_ROWS.value // self.block_m), batch * heads, 1),
                (n, q_tiles),
                {"HEAD_DIM": head_dim, "BLOCK_M": self.block_m, "BLOCK_N": keys_per_item},
                rows_tile,
                device,
                launch_pdl=True,
            )
        else:  # a full walk finishes its query tiles together, at the end: converted after it
            self.epilogue = CompiledLaunch(
                _epilogue_kernel,
                (triton.cdiv(rows, SUM_ROWS.value), 1, 1),
                (rows,),
                {"HEAD_DIM": head_dim},
                rows_tile,
                device,
            )
        self.launched = False  # set once a call has compiled and launched the kernels
        element = gl.bfloat16 if dtype == torch.bfloat16 else gl.float16

        def descriptor(block: list[int], dtype=element) -> TmaDescriptor:
            return TmaDescriptor(block, gl.NVMMASharedLayout.get_default_for(block, dtype))

        q_block, kv_block = [1, 1, self.block_m, head_dim], [1, 1, keys_per_item, head_dim]
        row_layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1)
        self.describe_q, self.describe_grad_out = descriptor(q_block), descriptor(q_block)
        self.describe_k, self.describe_v = descriptor(kv_block), descriptor(kv_block)
        self.describe_dq_acc = descriptor([1, 1, SUB_M.value, DQ_COLS.value], gl.float32)
        self.describe_row_stats = TmaDescriptor([self.block_m], row_layout)  # a query tile's L, or its Delta
        dkv_block = [1, 1, keys_per_item // 2, SWIZZLE_COLS.value]  # a consumer's keys x a swizzle block
        self.describe_dk, self.describe_dv = descriptor(dkv_block), descriptor(dkv_block)

    def compile_early(self) -> None:
        """Start compiling this layout's kernels on worker threads
        (:meth:`flashattn2._launch.CompiledLaunch.compile_in_background`), so that the first call finds them in
        Triton's cache: :meth:`_launch_each` with stand-ins for the call's tensors, new allocations of their
        dtypes (aligned, as the call's are), and descriptors of one block
        (:meth:`flashattn2._tma.TmaDescriptor.stand_in`)."""
        if self.launched or self.kernel.compiling is not None:
            return

        def pointer(dtype):  # an aligned tensor of this dtype
            return torch.empty(16, dtype=dtype, device=self.device)

        element, f32 = pointer(self.dtype), pointer(torch.float32)
        workspace = f32 if self.per_query_head else element
        self._launch_each(
            CompiledLaunch.compile_in_background,
            lambda describe, tensor: describe.stand_in(tensor.dtype, tensor.device),
            *(element,) * 5,  # grad_out, q, k, v, out
            *(f32,) * 3,  # lse, row_stats, dq_acc
            self.new_counters(),  # the ticket's alignment
            *(element,) * 3,  # dq, dk, dv
            workspace,
            workspace,
            pointer(torch.int32),  # the schedule table, copied to the device by the first call
        )

    def __call__(self, grad_out, q, k, v, out, lse, dq, dk, dv) -> None:
        row_stats, dq_acc, counters = self.new_row_stats(), self.new_dq_acc(), self.new_counters()
        if self.schedule_device is None:
            self.schedule_device = _hopper.schedule_tensor(self.schedule_table, self.device)
        if self.per_query_head:
            dk_out, dv_out = self.new_dkv_acc().unbind(0)
        else:
            dk_out, dv_out = dk, dv
        self._launch_each(
            CompiledLaunch.__call__,
            TmaDescriptor.__call__,
            grad_out,
            q,
            k,
            v,
            out,
            lse.view(-1),
            row_stats.view(-1),
            dq_acc,
            counters,
            dq,
            dk,
            dv,
            dk_out,
            dv_out,
            self.schedule_device,
        )
        self.launched = True

    def _launch_each(
        self, run, describe, grad_out, q, k, v, out, lse, stats, dq_acc, counters, dq, dk, dv, dk_out, dv_out, table
    ) -> None:
        """``run(launch, *arguments)`` for each of a call's launches in order, with ``describe(descriptor, tensor)``
        making the kernel's TMA descriptors: the call's arguments (:meth:`__call__`, lse flat) and temporaries
        (``stats``: L and Delta of each query tile, flat; the dQ workspace ``dq_acc``, the counters, where dK
        and dV go, the schedule table)."""
        run(self.prologue, out, grad_out, lse, stats, counters)
        q_desc = describe(self.describe_q, q)
        if self.causal:  # dK and dV from registers: their descriptors are not read
            dk_desc = dv_desc = q_desc
        else:
            dk_desc, dv_desc = describe(self.describe_dk, dk), describe(self.describe_dv, dv)
        run(
            self.kernel,
            q_desc,
            describe(self.describe_k, k),
            describe(self.describe_v, v),
            describe(self.describe_grad_out, grad_out),
            describe(self.describe_dq_acc, dq_acc),
            describe(self.describe_row_stats, stats),
            dk_out,
            dv_out,
            dk_desc,
            dv_desc,
            counters,
            counters[-1:],
            table,
        )
        # right after the kernel, whose programmatic dependent the causal epilogue is
        run(self.epilogue, *((dq_acc, dq, counters) if self.causal else (dq_acc, dq)))
        if self.per_query_head:
            run(self.group_sum, dk_out, dv_out, dk, dv)
