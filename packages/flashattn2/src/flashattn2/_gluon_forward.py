"""The Hopper forward, written in Gluon: two or three consumer warpgroups that drift apart, fed by a loader.

A work item is a tile of 128 query rows of one (batch, head), or 192 at head dim 64 on long sequences
(:data:`THREE_CONSUMER_THRESHOLDS`). A program takes one (head dim 256) or several in turn (head dims 64 and
128: persistent, one program per multiprocessor; causal items are assigned on the host by
:func:`causal_schedule`) and runs three partitions:

- a loader (one warp) brings an item's Q tile, then K and V tiles of 128 keys by TMA into a two-slot ring (one
  slot at head dim 256); a persistent program has two Q buffers, so the next item's Q arrives while the consumers
  finish this one, and its ring runs on from one item to the next;
- two consumers, or three (FlashAttention-3's head-dim-64 tile), each one warpgroup of 64 query rows in a
  partition of its own. Each runs ``S = Q K^T``, the online softmax (base 2, the scale folded into the
  exponent's argument) and ``O += P V`` with P from registers (from shared memory at head dim 256), then stores
  O by TMA and L. At head dim 64 the tensor cores also sum P's rows, as ``P @ ones``. At head dim 128 each
  consumer issues the next tile's S before this tile's P V and runs the next softmax while P V does
  (FlashAttention-3's intra-warpgroup overlap).

Nothing keeps the warpgroups in step (they meet only on the ring's slots), so one's softmax runs while another's
products use the tensor cores: the effect of FlashAttention-3's ping-pong scheduling (Shah et al. 2024,
arXiv:2407.08608) without its ordering barriers. Causal items run the query tiles that see the most keys first,
over a few (batch, head) pairs at a time, or over all of them where their K and V fit in half of L2.
Where it runs: :func:`hopper_forward_applies`.
"""

from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)

from flashattn2 import _hopper
from flashattn2._configs import Tile
from flashattn2._gluon_common import accumulator_layout, one_of, tma_load, tma_store, zero_at_run_time
from flashattn2._launch import CompiledLaunch, causal_head_group
from flashattn2._tma import TmaDescriptor
from flashattn2._triton_common import LOG2_E, heaviest_first

BLOCK_M = gl.constexpr(64)  # query rows per consumer warpgroup; a program has two or three
KEYS_PER_TILE = {64: 128, 128: 128, 256: 128}  # keys per K/V tile, by head dim
# From this head dim the K/V ring has one slot and P V reads P from shared memory. At 256, two 128-key slots of K
# and V (256 KB) do not fit beside Q (64 KB); one slot each with P's tiles (32 KB) does, and S, P and O of a
# 128-key tile do not fit in registers (v111). Against two slots of 64-key tiles with P in registers: 0.97-0.99x
# the time at eight shapes from (1, 5, 2000) to (1, 16, 8192), 1.01x at (8, 16, 1024) causal (benchmarks/NOTES.md,
# v138).
P_SHARED_HEAD_DIM = gl.constexpr(256)
NUM_WARPS = gl.constexpr(4)  # the default partition: the first consumer warpgroup
LN_2 = gl.constexpr(0.6931471805599453)  # L is stored in natural-log units
# Up to this head dim the row sums of P come from the tensor cores (P times a ones tile of wgmma's smallest width,
# 8), freeing 64 additions per thread and key tile: 0.96-0.98x the time at nine head-dim-64 shapes. At 128, where
# the tensor cores are busier, the extra product cost more than the additions (1.01-1.06x; benchmarks/NOTES.md, v66).
MMA_ROW_SUMS_MAX_HEAD_DIM = gl.constexpr(64)
ONES_WIDTH = gl.constexpr(8)  # the smallest N of a wgmma product
# The head dim whose consumers overlap their own products with their softmax (FlashAttention-3's intra-warpgroup
# overlap): 0.94-0.97x the time at ten head-dim-128 shapes; 1.02-1.04x at 64, where the products are short beside
# the softmax; at 256 ptxas serializes the products (C7512) and spills (benchmarks/NOTES.md, v72).
OVERLAP_HEAD_DIM = gl.constexpr(128)
# (batch, head) pairs whose causal query tiles are interleaved, heaviest first: one pair at a time starts its
# heaviest programs near the end of the launch, many at a time keep more K and V in flight than L2 holds.
# 4 was the fastest of 1, 4, 8, 16 and 32 at head dim 128 (benchmarks/NOTES.md, v46).
CAUSAL_HEAD_GROUP = 4
# Persistent programs take every pair in one group where all pairs' K and V (what each item reads again) take at
# most this share of L2: heaviest first over the whole launch balances few items better. On an H100 (50 MiB) that
# took 0.79-1.02x the forward's time at eleven shapes with 8-24 MiB of K and V, 1.00-1.35x at nine with 32 MiB
# and more (benchmarks/NOTES.md, v118).
ALL_PAIRS_L2_SHARE = 1 / 2
# Up to this head dim programs are persistent, causal ones with their items assigned on the host
# (causal_schedule). Against one program per item on an H100 (benchmarks/NOTES.md, v89, v93, v94): non-causal
# 0.97-0.98x the time at head dims 64 and 128 from 4096 keys, 0.90x at (8, 16, 1024, 128); causal 0.95-0.98x at
# head dim 128 from 4096 keys, 0.86-0.92x at 1024 and 2048, 0.96-1.01x at 64. At 256 a second Q buffer (64 KB)
# does not fit beside the K/V ring (128 KB).
PERSISTENT_MAX_HEAD_DIM = 128
LOADER_WARPS = gl.constexpr(1)  # the loader partition: one warp issues every TMA copy


@gluon.constexpr_function
def ring_slots(head_dim):
    """Slots of the K/V ring (see :data:`P_SHARED_HEAD_DIM`)."""
    return 1 if head_dim >= P_SHARED_HEAD_DIM else 2


@gluon.constexpr_function
def releases_k_first(head_dim):
    """Whether the consumers release a K slot once its S is done, before its V slot (where their steps issue
    S ahead of P V, or the ring has one slot); otherwise they release both once P V is done."""
    return head_dim >= OVERLAP_HEAD_DIM


@gluon.constexpr_function
def worker_consumer_registers(three_consumers):
    """Registers per thread of each consumer but the last (the default partition, which gets what the workers leave
    of the register file). With three consumers those two take 144 each; at 152 the kernel took 0.99-1.02x the
    time at five shapes (benchmarks/NOTES.md, v175)."""
    return 144 if three_consumers else 240


@gluon.constexpr_function
def loader_registers(head_dim):
    """Registers per thread of the loader's partition; the default partition (the last consumer) gets what the
    other two leave of the register file. Below 64, ptxas (CUDA 12.8, Triton 3.6) serializes every warpgroup
    product of the kernel at head dims 64 and 128 ("insufficient register resources", C7512). At 256 the
    consumers' S and O (64 and 128 registers) need all they can get: with the loader at 24 they get 240 each;
    with it at 48, 224 and 232, and they spilled and took 1.17-1.33x the time (benchmarks/NOTES.md, v138)."""
    return 24 if head_dim >= P_SHARED_HEAD_DIM else 64


@gluon.constexpr_function
def persistent(head_dim):
    """Whether a program takes several work items in turn (see the module's docstring)."""
    return head_dim <= PERSISTENT_MAX_HEAD_DIM


@gluon.constexpr_function
def consumers(three_consumers):
    """Consumer warpgroups of a program."""
    return 3 if three_consumers else 2


@gluon.constexpr_function
def item_rows(three_consumers):
    """Query rows of a work item: BLOCK_M per consumer warpgroup."""
    return BLOCK_M.value * consumers(three_consumers)


@gluon.jit
def _key_tiles(m_tile, n_ctx, CAUSAL: gl.constexpr, BLOCK_N: gl.constexpr, ITEM_ROWS: gl.constexpr):
    """How many key tiles of BLOCK_N keys the item of query tile ``m_tile`` (ITEM_ROWS rows) visits."""
    tiles = gl.cdiv(n_ctx, BLOCK_N)
    if CAUSAL:  # the item's rows see keys up to its last row
        tiles = gl.minimum(tiles, gl.cdiv((m_tile + 1) * ITEM_ROWS, BLOCK_N))
    return tiles


@gluon.jit
def _launch_order_item(idx, items, q_tiles, head_group):
    """Item ``idx`` of the causal launch order, as (batch * head, query tile): the query tiles with the most keys
    first, head_group (batch, head) pairs at a time, so that the launch ends on the lightest ones (the Triton
    kernels' :func:`~flashattn2._triton_common.heaviest_first` order)."""
    bh, rank = heaviest_first(idx, items // q_tiles, q_tiles, head_group)
    return bh, q_tiles - 1 - rank


@gluon.jit
def _item_count(schedule, CAUSAL: gl.constexpr):
    """How many work items this persistent program takes (``schedule``: see the kernel)."""
    first, stride, items, _, _, _, table = schedule
    if CAUSAL:  # noqa: SIM108 (a branch at compile time)
        count = gl.load(table + first + 1) - gl.load(table + first)
    else:
        count = gl.cdiv(items - first, stride)
    return count


@gluon.jit
def _item_at(t, schedule, CAUSAL: gl.constexpr):
    """This persistent program's ``t``-th work item: (batch, head, query tile, its Q buffer, that buffer's phase
    for this item). Items alternate between the two Q buffers."""
    first, stride, items, heads, q_tiles, head_group, table = schedule
    if CAUSAL:  # the causal_schedule table's
        bh, m_tile = _launch_order_item(gl.load(table + gl.load(table + first) + t), items, q_tiles, head_group)
    else:
        item = first + t * stride
        bh = item // q_tiles
        m_tile = item % q_tiles
    return bh // heads, bh % heads, m_tile, t % 2, (t // 2) & 1


@gluon.jit
def _load_item(
    loader_args,
    b,
    h,
    m_tile,
    q_buffer,
    q_bar,
    base,
    CAUSAL: gl.constexpr,
    HEAD_DIM: gl.constexpr,
    THREE_CONSUMERS: gl.constexpr,
):
    """Query tile ``m_tile`` of (batch ``b``, head ``h``): each consumer's BLOCK_M rows of Q into its tile of Q
    buffer ``q_buffer`` (ready on ``q_bar``), then K and V of each key tile it visits into the ring, from ring step
    ``base`` on (2 bytes per element). Returns the ring step after the item's."""
    q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, k_ready, v_ready, k_empty, v_empty, group, n_ctx = loader_args
    STAGES: gl.constexpr = k_smem.shape[0]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    CONSUMERS: gl.constexpr = consumers(THREE_CONSUMERS)
    ITEM_ROWS: gl.constexpr = CONSUMERS * BLOCK_M
    hk = h // group
    mbarrier.expect(q_bar, ITEM_ROWS * HEAD_DIM * 2)
    for c in gl.static_range(CONSUMERS):
        q_rows = q_smem.index(q_buffer * CONSUMERS + c).reshape([1, 1, BLOCK_M, HEAD_DIM])
        tma_load(q_desc, [b, h, m_tile * ITEM_ROWS + c * BLOCK_M, 0], q_bar, q_rows)
    n_kv = _key_tiles(m_tile, n_ctx, CAUSAL, BLOCK_N, ITEM_ROWS)
    for j in range(n_kv):
        slot = (base + j) % STAGES
        phase = (((base + j) // STAGES) & 1) ^ 1
        # A K slot is free once its S is done and a V slot once its P V is, or the whole slot once P V is done, on
        # v_empty (releases_k_first).
        if releases_k_first(HEAD_DIM):
            mbarrier.wait(k_empty.index(slot), phase)
        else:
            mbarrier.wait(v_empty.index(slot), phase)
        mbarrier.expect(k_ready.index(slot), BLOCK_N * HEAD_DIM * 2)
        tma_load(
            k_desc, [b, hk, j * BLOCK_N, 0], k_ready.index(slot), k_smem.index(slot).reshape([1, 1, BLOCK_N, HEAD_DIM])
        )
        if releases_k_first(HEAD_DIM):
            mbarrier.wait(v_empty.index(slot), phase)
        mbarrier.expect(v_ready.index(slot), BLOCK_N * HEAD_DIM * 2)
        tma_load(
            v_desc, [b, hk, j * BLOCK_N, 0], v_ready.index(slot), v_smem.index(slot).reshape([1, 1, BLOCK_N, HEAD_DIM])
        )
    return base + n_kv


@gluon.jit
def _loader(
    loader_args, q_bar, q_empty, schedule, CAUSAL: gl.constexpr, HEAD_DIM: gl.constexpr, THREE_CONSUMERS: gl.constexpr
):
    """The program's work items (``schedule``, see the kernel), each by :func:`_load_item`. A persistent program
    loads an item's Q into the Q buffer its item two before used, once the consumers have stored that item's O
    (on ``q_empty``), so that Q arrives while the consumers finish the item before."""
    if persistent(HEAD_DIM):
        base = 0
        for t in range(_item_count(schedule, CAUSAL)):
            b, h, m_tile, buf, q_phase = _item_at(t, schedule, CAUSAL)
            mbarrier.wait(q_empty.index(buf), q_phase ^ 1)
            base = _load_item(loader_args, b, h, m_tile, buf, q_bar.index(buf), base, CAUSAL, HEAD_DIM, THREE_CONSUMERS)
    else:  # one item
        b, h, m_tile = schedule
        _load_item(loader_args, b, h, m_tile, 0, q_bar.index(0), 0, CAUSAL, HEAD_DIM, THREE_CONSUMERS)


@gluon.jit
def _softmax(s, j, m_i, softmax_args, CAUSAL: gl.constexpr, NEGATIVE_SCALE: gl.constexpr, BLOCK_N: gl.constexpr):
    """The online softmax of key tile ``j``'s raw scores ``s`` (fp32, ``(BLOCK_M, BLOCK_N)``): P (fp32, not
    normalized), the factor ``alpha = 2^(m_i - m_new)`` for what was summed before, and the new row maximum
    ``m_new`` (base 2). ``softmax_args``: the consumer's query rows, the key offsets within a tile, the first key
    tile that needs a mask, the sequence length and the softmax scale times log2(e)."""
    rows, offs_n, masked_from, n_ctx, qk_scale_log2 = softmax_args
    if j >= masked_from:
        keys = j * BLOCK_N + offs_n
        visible = (keys < n_ctx)[None, :]
        if CAUSAL:
            # a difference: as keys <= rows, ptxas serializes the products of the persistent head-dim-64
            # kernel (C7515, benchmarks/NOTES.md, v94)
            visible = visible & ((keys[None, :] - rows[:, None]) <= 0)
        s2 = gl.where(visible, s * qk_scale_log2, float("-inf"))
        m_new = gl.maximum(m_i, gl.max(s2, 1))
        p = gl.exp2(s2 - m_new[:, None])
    else:
        # The scale inside the exponent's argument (one FMA per score): the row maximum of the scaled
        # scores is the scaled maximum of the raw ones, or their minimum when the scale is negative.
        raw_max = gl.min(s, 1) if NEGATIVE_SCALE else gl.max(s, 1)
        m_new = gl.maximum(m_i, raw_max * qk_scale_log2)
        p = gl.exp2(s * qk_scale_log2 - m_new[:, None])
    return p, gl.exp2(m_i - m_new), m_new


@gluon.jit
def _p_v_done(acc, l_i, MMA_ROW_SUMS: gl.constexpr):
    """O's accumulator ``acc`` and the row sums ``l_i`` once this warpgroup's products are done (with MMA_ROW_SUMS
    the row sums are a product's accumulator too)."""
    if MMA_ROW_SUMS:
        acc, l_i = warpgroup_mma_wait(num_outstanding=0, deps=(acc, l_i))
    else:
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    return acc, l_i


@gluon.jit
def _steps_in_turn(
    q,
    ring,
    kv_empty,
    ones_smem,
    n_kv,
    base,
    softmax_args,
    CAUSAL: gl.constexpr,
    NEGATIVE_SCALE: gl.constexpr,
    HEAD_DIM: gl.constexpr,
    BLOCK_N: gl.constexpr,
    WAIT_IN_STEP: gl.constexpr,
):
    """The ``n_kv`` key tiles of one consumer's item, from ring step ``base`` on, each step's products in turn: S,
    its softmax, P V; a ring slot is released (on ``kv_empty``) once its P V is done. Returns O's unnormalized
    accumulator (fp32, ``(BLOCK_M, HEAD_DIM)``), the row sums and row maxima (base 2) of P, with every product
    complete. ``ring``: the K and V tiles and their ready barriers; ``softmax_args``: as :func:`_softmax` takes
    them. A step's P V is waited for at the top of the next step, or with WAIT_IN_STEP before the loop goes round:
    where two or more worker partitions issue products, ptxas serializes every product of the kernel (C7512) if one
    is in flight across a loop's back edge (benchmarks/NOTES.md, v175). Elsewhere waiting at the top took 0.97-0.99x
    the time of waiting before the back edge (v175, v176)."""
    k_smem, v_smem, k_ready, v_ready = ring
    STAGES: gl.constexpr = k_smem.shape[0]
    s_layout: gl.constexpr = accumulator_layout(BLOCK_N)
    o_layout: gl.constexpr = accumulator_layout(HEAD_DIM)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    sums_layout: gl.constexpr = accumulator_layout(ONES_WIDTH)
    p_sums_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=sums_layout, k_width=2)
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    o_row_layout: gl.constexpr = gl.SliceLayout(1, o_layout)
    dtype: gl.constexpr = q.dtype
    MMA_ROW_SUMS: gl.constexpr = HEAD_DIM <= MMA_ROW_SUMS_MAX_HEAD_DIM

    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, row_layout)
    if MMA_ROW_SUMS:  # running row sums, in ONES_WIDTH equal columns
        l_i = gl.zeros([BLOCK_M, ONES_WIDTH], gl.float32, sums_layout)
    else:
        l_i = gl.zeros([BLOCK_M], gl.float32, row_layout)
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
    if not WAIT_IN_STEP:  # the loop waits for them at its top
        acc = warpgroup_mma_init(acc)
        if MMA_ROW_SUMS:
            l_i = warpgroup_mma_init(l_i)
    for j in range(n_kv):
        slot = (base + j) % STAGES
        if not WAIT_IN_STEP:  # the previous tile's P V (and row sums)
            acc, l_i = _p_v_done(acc, l_i, MMA_ROW_SUMS)
        phase = ((base + j) // STAGES) & 1
        if j > 0:  # the previous tile's slot is free
            mbarrier.arrive(kv_empty.index((base + j - 1) % STAGES))
        mbarrier.wait(k_ready.index(slot), phase)
        s = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
        p, alpha, m_i = _softmax(s, j, m_i, softmax_args, CAUSAL, NEGATIVE_SCALE, BLOCK_N)
        if MMA_ROW_SUMS:
            l_i = l_i * gl.convert_layout(alpha, gl.SliceLayout(1, sums_layout))[:, None]
        else:
            l_i = l_i * alpha + gl.sum(p, 1)
        acc = acc * gl.convert_layout(alpha, o_row_layout)[:, None]
        p_op = gl.convert_layout(p.to(dtype), p_layout)
        if MMA_ROW_SUMS:
            p_sums = gl.convert_layout(p.to(dtype), p_sums_layout)
            l_i = warpgroup_mma(p_sums, ones_smem.permute((1, 0)), l_i, is_async=True)
        mbarrier.wait(v_ready.index(slot), phase)
        acc = warpgroup_mma(p_op, v_smem.index(slot), acc, is_async=True)
        if WAIT_IN_STEP:
            acc, l_i = _p_v_done(acc, l_i, MMA_ROW_SUMS)
    if not WAIT_IN_STEP:
        acc, l_i = _p_v_done(acc, l_i, MMA_ROW_SUMS)
    if MMA_ROW_SUMS:
        l_i = gl.convert_layout(gl.max(l_i, 1), row_layout)
    # the last slot, free for a next item
    mbarrier.arrive(kv_empty.index((base + n_kv - 1) % STAGES))
    return acc, l_i, m_i


@gluon.jit
def _steps_overlapped(
    q,
    ring,
    k_empty,
    v_empty,
    n_kv,
    base,
    softmax_args,
    CAUSAL: gl.constexpr,
    NEGATIVE_SCALE: gl.constexpr,
    HEAD_DIM: gl.constexpr,
    BLOCK_N: gl.constexpr,
):
    """As :func:`_steps_in_turn`, with FlashAttention-3's intra-warpgroup overlap: each step issues the next
    tile's S before this tile's P V and runs the next tile's softmax while P V does. A K slot is released
    once its S is done, a V slot once its P V is; the loader refills K a step ahead."""
    k_smem, v_smem, k_ready, v_ready = ring
    STAGES: gl.constexpr = k_smem.shape[0]
    s_layout: gl.constexpr = accumulator_layout(BLOCK_N)
    o_layout: gl.constexpr = accumulator_layout(HEAD_DIM)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    o_row_layout: gl.constexpr = gl.SliceLayout(1, o_layout)
    dtype: gl.constexpr = q.dtype

    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    mbarrier.wait(k_ready.index(base % STAGES), (base // STAGES) & 1)
    s = warpgroup_mma(q, k_smem.index(base % STAGES).permute((1, 0)), zero_s, use_acc=False, is_async=True)
    s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
    mbarrier.arrive(k_empty.index(base % STAGES))
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
    p, alpha, m_i = _softmax(s, 0, m_i, softmax_args, CAUSAL, NEGATIVE_SCALE, BLOCK_N)
    l_i = gl.sum(p, 1)
    # P in the product's dtype at once: P V reads it from registers while the next softmax runs beside it.
    p_op = gl.convert_layout(p.to(dtype), p_layout)
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
    for j in range(n_kv - 1):
        slot = (base + j) % STAGES
        nxt = (base + j + 1) % STAGES
        mbarrier.wait(k_ready.index(nxt), ((base + j + 1) // STAGES) & 1)
        s = warpgroup_mma(q, k_smem.index(nxt).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        acc = acc * gl.convert_layout(alpha, o_row_layout)[:, None]
        mbarrier.wait(v_ready.index(slot), ((base + j) // STAGES) & 1)
        acc = warpgroup_mma(p_op, v_smem.index(slot), acc, is_async=True)
        s = warpgroup_mma_wait(num_outstanding=1, deps=(s,))  # S done, P V still running
        mbarrier.arrive(k_empty.index(nxt))
        p, alpha, m_i = _softmax(s, j + 1, m_i, softmax_args, CAUSAL, NEGATIVE_SCALE, BLOCK_N)
        l_i = l_i * alpha + gl.sum(p, 1)
        p_next = gl.convert_layout(p.to(dtype), p_layout)
        # P's registers stay live until P V is done.
        acc, p_op = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p_op))
        mbarrier.arrive(v_empty.index(slot))
        p_op = p_next
    slot = (base + n_kv - 1) % STAGES
    acc = acc * gl.convert_layout(alpha, o_row_layout)[:, None]
    mbarrier.wait(v_ready.index(slot), ((base + n_kv - 1) // STAGES) & 1)
    acc = warpgroup_mma(p_op, v_smem.index(slot), acc, is_async=True)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    mbarrier.arrive(v_empty.index(slot))  # the last V slot, free for a next item
    return acc, l_i, m_i


@gluon.jit
def _steps_p_shared(
    q,
    ring,
    k_empty,
    v_empty,
    p_smem,
    n_kv,
    base,
    softmax_args,
    CAUSAL: gl.constexpr,
    NEGATIVE_SCALE: gl.constexpr,
    HEAD_DIM: gl.constexpr,
    BLOCK_N: gl.constexpr,
):
    """As :func:`_steps_in_turn`, with P stored to ``p_smem`` (the consumer's ``(BLOCK_M, BLOCK_N)`` tile in the
    input dtype) for a P V product that reads it from shared memory. A K slot is released once its S is done, a V
    slot once its P V is."""
    k_smem, v_smem, k_ready, v_ready = ring
    STAGES: gl.constexpr = k_smem.shape[0]
    s_layout: gl.constexpr = accumulator_layout(BLOCK_N)
    o_layout: gl.constexpr = accumulator_layout(HEAD_DIM)
    o_row_layout: gl.constexpr = gl.SliceLayout(1, o_layout)

    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([BLOCK_M], gl.float32, gl.SliceLayout(1, s_layout))
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
    for j in range(n_kv):
        # Q, K and V addressed afresh in each step (zero_at_run_time): with their products' descriptors hoisted
        # out of the loop, ptxas spilled 152-168 bytes per thread and the forward took 1.03-1.04x the time
        # (benchmarks/NOTES.md, v157).
        fresh = zero_at_run_time(j)
        slot = (base + j) % STAGES + fresh
        phase = ((base + j) // STAGES) & 1
        mbarrier.wait(k_ready.index(slot), phase)
        q_step = one_of(q).index(fresh)
        s = warpgroup_mma(q_step, k_smem.index(slot).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
        mbarrier.arrive(k_empty.index(slot))
        p, alpha, m_i = _softmax(s, j, m_i, softmax_args, CAUSAL, NEGATIVE_SCALE, BLOCK_N)
        l_i = l_i * alpha + gl.sum(p, 1)
        acc = acc * gl.convert_layout(alpha, o_row_layout)[:, None]
        p_smem.store(p.to(q.dtype))
        fence_async_shared()
        mbarrier.wait(v_ready.index(slot), phase)
        acc = warpgroup_mma(p_smem, v_smem.index(slot), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))  # P's tile is free for the next step
        mbarrier.arrive(v_empty.index(slot))
    return acc, l_i, m_i


@gluon.jit
def _consume_item(
    item_args,
    q,
    q_bar,
    q_phase,
    b,
    h,
    m_tile,
    base,
    CAUSAL: gl.constexpr,
    NEGATIVE_SCALE: gl.constexpr,
    HEAD_DIM: gl.constexpr,
    INDEX: gl.constexpr,
    THREE_CONSUMERS: gl.constexpr,
):
    """Consumer INDEX's BLOCK_M query rows of query tile ``m_tile`` of (batch ``b``, head ``h``), whose Q tile is
    ``q`` (ready on ``q_bar`` in phase ``q_phase``), key tiles from ring step ``base`` on: O (by TMA, through
    ``q``'s buffer) and L (natural log). Returns the ring step after the item's, once O's store has read ``q``.
    ``item_args``: the kernel's run-time arguments, named where unpacked."""
    (
        lse_ptr,
        o_desc,
        operand_smem,
        k_smem,
        v_smem,
        k_ready,
        v_ready,
        k_empty,
        v_empty,
        heads,
        n_ctx,
        qk_scale_log2,
    ) = item_args
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    ITEM_ROWS: gl.constexpr = item_rows(THREE_CONSUMERS)
    s_layout: gl.constexpr = accumulator_layout(BLOCK_N)
    o_layout: gl.constexpr = accumulator_layout(HEAD_DIM)
    dtype: gl.constexpr = q.dtype

    r0 = m_tile * ITEM_ROWS + INDEX * BLOCK_M
    rows = r0 + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    n_kv = _key_tiles(m_tile, n_ctx, CAUSAL, BLOCK_N, ITEM_ROWS)
    # Key tiles from here on need a mask: those that cross these rows' diagonal, and the ragged last one.
    masked_from = r0 // BLOCK_N if CAUSAL else n_ctx // BLOCK_N
    mbarrier.wait(q_bar, q_phase)
    ring = (k_smem, v_smem, k_ready, v_ready)
    softmax_args = (rows, offs_n, masked_from, n_ctx, qk_scale_log2)
    if HEAD_DIM >= P_SHARED_HEAD_DIM:
        p_smem = operand_smem.index(INDEX)
        acc, l_i, m_i = _steps_p_shared(
            q, ring, k_empty, v_empty, p_smem, n_kv, base, softmax_args, CAUSAL, NEGATIVE_SCALE, HEAD_DIM, BLOCK_N
        )
    elif HEAD_DIM == OVERLAP_HEAD_DIM:
        acc, l_i, m_i = _steps_overlapped(
            q, ring, k_empty, v_empty, n_kv, base, softmax_args, CAUSAL, NEGATIVE_SCALE, HEAD_DIM, BLOCK_N
        )
    else:  # v_empty releases a whole slot
        acc, l_i, m_i = _steps_in_turn(
            q,
            ring,
            v_empty,
            operand_smem,
            n_kv,
            base,
            softmax_args,
            CAUSAL,
            NEGATIVE_SCALE,
            HEAD_DIM,
            BLOCK_N,
            THREE_CONSUMERS,  # two worker partitions issue products
        )
    gl.store(lse_ptr + (b * heads + h) * n_ctx + rows, m_i * LN_2 + gl.log(l_i), mask=rows < n_ctx)
    o = acc / gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))[:, None]
    o_smem = q  # every S of this consumer is done: its Q tile is free
    o_smem.store(o.to(dtype))
    fence_async_shared()
    tma_store(o_desc, [b, h, r0, 0], o_smem.reshape([1, 1, BLOCK_M, HEAD_DIM]))
    tma.store_wait(pendings=0)
    return base + n_kv


@gluon.jit
def _consumer(
    consumer_args,
    CAUSAL: gl.constexpr,
    NEGATIVE_SCALE: gl.constexpr,
    HEAD_DIM: gl.constexpr,
    INDEX: gl.constexpr,
    THREE_CONSUMERS: gl.constexpr,
):
    """The program's work items (``schedule``, see the kernel), each by :func:`_consume_item`: consumer INDEX's
    rows of each, its Q tile of each Q buffer in ``q_smem``. A persistent program releases an item's Q buffer (on
    ``q_empty``) once its O is stored. ``consumer_args``: ``_consume_item``'s arguments, then those named here."""
    item_args, q_smem, q_bar, q_empty, schedule = consumer_args
    CONSUMERS: gl.constexpr = consumers(THREE_CONSUMERS)
    if persistent(HEAD_DIM):
        base = 0
        for t in range(_item_count(schedule, CAUSAL)):
            b, h, m_tile, buf, q_phase = _item_at(t, schedule, CAUSAL)
            base = _consume_item(
                item_args,
                q_smem.index(buf * CONSUMERS + INDEX),
                q_bar.index(buf),
                q_phase,
                b,
                h,
                m_tile,
                base,
                CAUSAL,
                NEGATIVE_SCALE,
                HEAD_DIM,
                INDEX,
                THREE_CONSUMERS,
            )
            mbarrier.arrive(q_empty.index(buf))
    else:  # one item
        b, h, m_tile = schedule
        _consume_item(
            item_args,
            q_smem.index(INDEX),
            q_bar.index(0),
            0,
            b,
            h,
            m_tile,
            0,
            CAUSAL,
            NEGATIVE_SCALE,
            HEAD_DIM,
            INDEX,
            THREE_CONSUMERS,
        )


@gluon.jit
def _hopper_forward_kernel(
    q_desc,
    k_desc,
    v_desc,
    o_desc,
    lse_ptr,
    schedule_table,
    items,
    heads,
    group,
    n_ctx,
    head_group,
    qk_scale_log2,
    CAUSAL: gl.constexpr,
    NEGATIVE_SCALE: gl.constexpr,
    HEAD_DIM: gl.constexpr,
    BLOCK_N: gl.constexpr,
    THREE_CONSUMERS: gl.constexpr,
):
    # A work item is a query tile of ITEM_ROWS rows of a (batch, head); items are numbered by (batch, head) and
    # then by query tile, or causal ones in their launch order (_launch_order_item). Consumer i takes rows
    # [i * BLOCK_M, +BLOCK_M) of an item; q_desc and o_desc move BLOCK_M rows.
    ITEM_ROWS: gl.constexpr = item_rows(THREE_CONSUMERS)
    CONSUMERS: gl.constexpr = consumers(THREE_CONSUMERS)
    q_tiles = gl.cdiv(n_ctx, ITEM_ROWS)
    pid = gl.program_id(0)
    if persistent(HEAD_DIM):
        # Non-causal: program p takes items p, p + grid, ... in turn; neighbouring programs share a head's K and V
        # in L2. Causal: the items causal_schedule gave program p (schedule_table, int32), in the launch order.
        schedule = (pid, gl.num_programs(0), items, heads, q_tiles, head_group, schedule_table)
    else:
        # One item per program. Programs start in the order of their ids (the hardware's dispatch order).
        if CAUSAL:
            bh, m_tile = _launch_order_item(pid, items, q_tiles, head_group)
        else:
            m_tile = pid % q_tiles
            bh = pid // q_tiles
        schedule = (bh // heads, bh % heads, m_tile)
    Q_BUFFERS: gl.constexpr = 2 if persistent(HEAD_DIM) else 1
    # three consumers: the head-dim-64 steps (_steps_in_turn), in persistent programs (two Q buffers)
    gl.static_assert(not THREE_CONSUMERS or HEAD_DIM <= MMA_ROW_SUMS_MAX_HEAD_DIM)
    dtype: gl.constexpr = q_desc.dtype
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    # Q buffer i's tile for consumer c: q_smem.index(i * CONSUMERS + c)
    q_smem = gl.allocate_shared_memory(dtype, [Q_BUFFERS * CONSUMERS, BLOCK_M, HEAD_DIM], q_layout)
    STAGES: gl.constexpr = ring_slots(HEAD_DIM)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [Q_BUFFERS, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [Q_BUFFERS, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    RELEASES: gl.constexpr = CONSUMERS  # arrivals that free a buffer: one per consumer
    for i in gl.static_range(Q_BUFFERS):
        mbarrier.init(q_bar.index(i), count=1)
    for i in gl.static_range(Q_BUFFERS):
        mbarrier.init(q_empty.index(i), count=RELEASES)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(v_ready.index(i), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_empty.index(i), count=RELEASES)
    for i in gl.static_range(STAGES):
        mbarrier.init(v_empty.index(i), count=RELEASES)
    # The consumers' operand tile in shared memory: the ones tile of the row sums' product, or each consumer's P.
    if HEAD_DIM <= MMA_ROW_SUMS_MAX_HEAD_DIM:
        ones_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([ONES_WIDTH, BLOCK_N], dtype)
        operand_smem = gl.allocate_shared_memory(dtype, [ONES_WIDTH, BLOCK_N], ones_layout)
        ones_layout_regs: gl.constexpr = gl.BlockedLayout([1, 8], [2, 16], [NUM_WARPS, 1], [1, 0])
        operand_smem.store(gl.full([ONES_WIDTH, BLOCK_N], 1.0, dtype, ones_layout_regs))
    elif HEAD_DIM >= P_SHARED_HEAD_DIM:
        p_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_N], dtype)
        operand_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_M, BLOCK_N], p_layout)
    else:
        operand_smem = 0  # unused; a partition's arguments cannot be None
    fence_async_shared()
    # Arguments shared by partitions that differ only in a constexpr, packed once. The constexprs are passed
    # beside the tuple: Gluon 3.6 hands a tuple built in the kernel to the partitions as run-time values.
    item_args = (
        lse_ptr,
        o_desc,
        operand_smem,
        k_smem,
        v_smem,
        k_ready,
        v_ready,
        k_empty,
        v_empty,
        heads,
        n_ctx,
        qk_scale_log2,
    )
    consumer_args = (item_args, q_smem, q_bar, q_empty, schedule)
    loader_args = (
        q_desc,
        k_desc,
        v_desc,
        q_smem,
        k_smem,
        v_smem,
        k_ready,
        v_ready,
        k_empty,
        v_empty,
        group,
        n_ctx,
    )
    # The last consumer is the default partition; the others and the loader are workers.
    if THREE_CONSUMERS:
        gl.warp_specialize(
            [
                (_consumer, (consumer_args, CAUSAL, NEGATIVE_SCALE, HEAD_DIM, 2, True)),
                (_consumer, (consumer_args, CAUSAL, NEGATIVE_SCALE, HEAD_DIM, 0, True)),
                (_consumer, (consumer_args, CAUSAL, NEGATIVE_SCALE, HEAD_DIM, 1, True)),
                (_loader, (loader_args, q_bar, q_empty, schedule, CAUSAL, HEAD_DIM, THREE_CONSUMERS)),
            ],
            [NUM_WARPS, NUM_WARPS, LOADER_WARPS],  # warps of the workers
            [worker_consumer_registers(True), worker_consumer_registers(True), loader_registers(HEAD_DIM)],
        )
    else:
        gl.warp_specialize(
            [
                (_consumer, (consumer_args, CAUSAL, NEGATIVE_SCALE, HEAD_DIM, 1, False)),
                (_consumer, (consumer_args, CAUSAL, NEGATIVE_SCALE, HEAD_DIM, 0, False)),
                (_loader, (loader_args, q_bar, q_empty, schedule, CAUSAL, HEAD_DIM, THREE_CONSUMERS)),
            ],
            [NUM_WARPS, LOADER_WARPS],  # warps of the workers
            [worker_consumer_registers(False), loader_registers(HEAD_DIM)],  # registers per thread of those
        )


# Where the kernel is faster than the Triton kernel (benchmarks/hopper_kernels.py --kernel forward, NOTES v41, v66, v69,
# v72, v92, v96, v114), by (head dim, causal): pairs (fewest keys per sequence, fewest scores B x H x N^2), as the
# backward's (flashattn2._hopper.reaches).
# - Head dim 128, from 512 keys: 0.74-0.85x the Triton kernel's time at (8, 16, 512), (32, 16, 512) and
#   (8, 16, 1024) causal and full, 0.76-0.79x from 2048 keys up (before v92's direct launch, 1.28x at (8, 16, 512)
#   full, where the host set the pace).
# - Head dim 64, causal from 2048 keys: 0.85-0.97x at eight shapes of 2048 keys from (1, 8) to (32, 16) pairs,
#   0.73-0.98x at twelve from 4096 keys up to (4, 16, 16384); (1, 8, 2048), where the host's time per call
#   decides, read 0.85-0.87x on H100 hosts and 1.78x on a slower H200 host. From 512 keys with 2**28 scores:
#   0.94-0.98x at three shapes by CUDA-graph replays in two runs (v114, v128; with 2**27 0.93-0.96x replayed, but
#   0.99-1.07x in eager calls at 1024 keys, v96, where the host's time per call decides). Non-causal from 1024 keys:
#   0.93-0.98x (persistent) at six shapes from (8, 16, 1024) and (32, 12, 512) to (2, 16, 4096); 1.50x at
#   (8, 16, 512).
# - Head dim 256: causal from 512 keys, 0.63-0.74x at six shapes from (8, 16, 512) and (1, 16, 1024) up;
#   non-causal 0.66-0.69x at (4, 16, 2048) and (2, 16, 4096), 1.28x at (1, 3, 1000), where three heads leave most
#   multiprocessors idle.
THRESHOLDS = {
    (64, True): ((2048, 0), (512, 2**28)),
    (64, False): ((1024, 0),),
    (128, True): ((512, 0),),
    (128, False): ((512, 0),),
    (256, True): ((512, 0),),
    (256, False): ((2048, 0),),
}


def hopper_forward_applies(q_shape, k_shape, tma_strides, dtype, device, causal: bool, aligned) -> bool:
    """Whether :class:`HopperForward` runs this layout: :func:`flashattn2._hopper.layout_supported` (with
    ``tma_strides`` those of q, k and v) and one of its (head dim, mask)'s :data:`THRESHOLDS`.
    ``FLASHATTN2_HOPPER_FORWARD=0`` turns it off."""
    if not _hopper.enabled("forward") or not _hopper.layout_supported(
        "forward", q_shape, k_shape, tma_strides, dtype, device, aligned
    ):
        return False
    return _hopper.reaches(THRESHOLDS[(q_shape[3], causal)], q_shape)


# Where the head-dim-64 forward runs three consumers (192-row items, FlashAttention-3's head-dim-64 tile; Shah et al.
# 2024, arXiv:2407.08608) instead of two, by mask: (fewest keys, fewest scores) pairs as THRESHOLDS'. Against two on
# an H100, CUDA-graph replays (benchmarks/NOTES.md, v149-v151): causal 0.92-0.98x the time at twelve shapes from
# (2, 5, 5000) and (2, 16, 5120) to (1, 8, 32768), 1.00-1.06x at (4, 16, 4096), (2, 16, 4096) and (16, 16, 2048);
# non-causal 0.92-0.97x at five shapes from (16, 16, 1536) to (1, 16, 16384), 1.02-1.06x at (16, 16, 1024) and
# (32, 16, 1024).
THREE_CONSUMER_THRESHOLDS = {True: ((5000, 0),), False: ((1536, 0),)}


def three_consumers(q_shape, causal: bool) -> bool:
    """Whether a layout that :func:`hopper_forward_applies` takes runs three consumer warpgroups per program."""
    return q_shape[3] <= MMA_ROW_SUMS_MAX_HEAD_DIM.value and _hopper.reaches(THREE_CONSUMER_THRESHOLDS[causal], q_shape)


def causal_schedule(
    items: int, q_tiles: int, programs: int, head_group: int, rows: int = 128, keys: int | None = None
) -> list[int]:
    """The causal work items of persistent programs, as their kernel reads them (:func:`_hopper.deal_in_order`'s
    table of item numbers in the launch order of :func:`_launch_order_item`, heaviest first in groups of
    ``head_group`` pairs), for items of ``rows`` query rows over ``keys`` keys per sequence (``q_tiles * rows``
    when ``None``). Each item costs its key tiles and one more for its fill and drain; on 132 programs the
    busiest carries 1.002x the mean at (4, 16, 4096) and (1, 16, 16384), 1.04x at (8, 16, 2048). A program's
    items follow the launch order, so programs running at the same time share K and V in L2."""
    pairs = items // q_tiles
    block_n = KEYS_PER_TILE[64]  # every head dim's
    key_tiles = triton.cdiv(q_tiles * rows if keys is None else keys, block_n)

    def cost(idx: int) -> int:
        # the query tile of item idx, as _launch_order_item computes it, and the key tiles it visits (_key_tiles)
        first = idx // (head_group * q_tiles) * head_group
        query_tile = q_tiles - 1 - (idx - first * q_tiles) // min(pairs - first, head_group)
        return min(triton.cdiv((query_tile + 1) * rows, block_n), key_tiles) + 1

    return _hopper.deal_in_order(map(cost, range(items)), programs)


class HopperForward:
    """``forward(q, k, v, out, lse)``: fills out and lse for one layout.

    Arguments (constructor): the shapes ``(B, H, N, D)`` of q and ``(B, Hkv, N, D)`` of k, the dtype
    (fp16 or bf16), device, mask and softmax scale, for which :func:`hopper_forward_applies` holds.
    Call arguments: q, k, v with TMA-ready strides; out ``(B, H, N, D)`` contiguous in q's dtype and
    lse ``(B, H, N)`` contiguous float32, as ``triton_forward`` returns them.
    """

    def __init__(self, q_shape, k_shape, dtype, device, causal: bool, softmax_scale: float):
        batch, heads, n, head_dim = q_shape
        block_n = KEYS_PER_TILE[head_dim]
        self.three_consumers = three_consumers(q_shape, causal)
        rows = item_rows(self.three_consumers)
        q_tiles = triton.cdiv(n, rows)
        self.items = q_tiles * batch * heads
        if persistent(head_dim):  # one program per multiprocessor (of an MPS client's share), at most
            self.grid = (min(self.items, _hopper.usable_multiprocessors(device)),)
        else:
            self.grid = (self.items,)
        # causal persistent programs: their items (a device copy made by the first call)
        self.head_group, self.schedule_table = CAUSAL_HEAD_GROUP, None
        if persistent(head_dim) and causal:
            kv_bytes = batch * k_shape[1] * n * head_dim * 4  # K and V, 2 bytes an element
            self.head_group = causal_head_group(
                causal, batch * heads, kv_bytes, ALL_PAIRS_L2_SHARE, device, CAUSAL_HEAD_GROUP
            )
            self.schedule_table = causal_schedule(self.items, q_tiles, self.grid[0], self.head_group, rows, n)
        self.schedule_device = None
        self.kernel = CompiledLaunch(
            _hopper_forward_kernel,
            (*self.grid, 1, 1),
            (self.items, heads, heads // k_shape[1], n, self.head_group, softmax_scale * LOG2_E),
            {
                "CAUSAL": causal,
                "NEGATIVE_SCALE": softmax_scale < 0,
                "HEAD_DIM": head_dim,
                "BLOCK_N": block_n,
                "THREE_CONSUMERS": self.three_consumers,
            },
            # the default partition's warps; Gluon kernels pipeline themselves (Triton's stage count is not read)
            Tile(rows, block_n, NUM_WARPS.value, 1),
            device,
        )
        element = gl.bfloat16 if dtype == torch.bfloat16 else gl.float16
        rows_block, kv_block = [1, 1, BLOCK_M.value, head_dim], [1, 1, block_n, head_dim]
        rows_layout = gl.NVMMASharedLayout.get_default_for(rows_block, element)
        kv_layout = gl.NVMMASharedLayout.get_default_for(kv_block, element)
        # q, k, v and out: a consumer's rows of q and out, a key tile of k and v
        self.descriptors = (
            TmaDescriptor(rows_block, rows_layout),
            TmaDescriptor(kv_block, kv_layout),
            TmaDescriptor(kv_block, kv_layout),
            TmaDescriptor(rows_block, rows_layout),
        )
        self.launched = False  # set once a call has compiled and launched the kernel

    def __call__(self, q, k, v, out, lse) -> None:
        if self.schedule_device is None:
            self.schedule_device = _hopper.schedule_tensor(self.schedule_table, q.device)
        describe_q, describe_k, describe_v, describe_out = self.descriptors
        self.kernel(describe_q(q), describe_k(k), describe_v(v), describe_out(out), lse, self.schedule_device)
        self.launched = True
