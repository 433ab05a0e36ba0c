"""Scratch: the D = 64 Hopper forward with three consumer warpgroups and 192-row items, as two consumer
partitions: the default partition of 8 warps owns rows 0-127 of an item (its two warpgroups in step: Gluon
brackets each mbarrier arrive of a partition with bar.sync), a 4-warp worker partition owns rows 128-191, and a
1-warp loader feeds both. v125 found ptxas serializing the products whenever a second *worker* partition issues
wgmma; here only one worker does. Persistent programs; causal items from a host table as the package deals them.
"""

from __future__ import annotations

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

ITEM_ROWS = gl.constexpr(192)
DEFAULT_ROWS = gl.constexpr(128)
WORKER_ROWS = gl.constexpr(64)
Q_PIECE = gl.constexpr(64)  # rows per TMA load of Q and store of O
LN_2 = gl.constexpr(0.6931471805599453)
ONES_WIDTH = gl.constexpr(8)
LOADER_REGS = gl.constexpr(64)
LOADER_WARPS = gl.constexpr(4)
CONSUMER_WARPS = gl.constexpr(12)  # every consumer warp arrives on the empty barriers on its own


@gluon.jit
def _wait(offset, phase, WARPS: gl.constexpr):
    # waits for the mbarrier at global_smem + offset to complete phase ``phase``, with no bar.sync before
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])
    off = gl.full([32 * WARPS], offset, gl.int32, layout)
    ph = gl.full([32 * WARPS], phase, gl.int32, layout)
    gl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .b32 a; mov.b32 a, global_smem; add.u32 a, a, $1; "
        "waitLoop: mbarrier.try_wait.parity.shared::cta.b64 p, [a], $2; @!p bra.uni waitLoop; mov.b32 $0, 0; }",
        "=r,r,r", [off, ph], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _release(offset, WARPS: gl.constexpr):
    # lane 0 of each warp arrives on the mbarrier at global_smem + offset (bytes), without the warpgroup bar.sync
    # Gluon puts before its own arrive
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])
    off = gl.full([32 * WARPS], offset, gl.int32, layout)
    gl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .b32 a, l; mov.u32 l, %laneid; setp.eq.u32 p, l, 0; mov.b32 a, global_smem; "
        "add.u32 a, a, $1; bar.warp.sync -1; @p mbarrier.arrive.shared::cta.b64 _, [a]; mov.b32 $0, 0; }",
        "=r,r", [off], dtype=gl.int32, is_pure=False, pack=1)


@gluon.constexpr_function
def _acc_layout(rows, columns):
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[rows // 16, 1], instr_shape=[16, columns, 16])


@gluon.jit
def _key_tiles(m_tile, n_ctx, CAUSAL: gl.constexpr, BLOCK_N: gl.constexpr):
    tiles = gl.cdiv(n_ctx, BLOCK_N)
    if CAUSAL:
        tiles = gl.minimum(tiles, gl.cdiv((m_tile + 1) * ITEM_ROWS, BLOCK_N))
    return tiles


@gluon.jit
def _launch_order_item(idx, items, q_tiles, head_group):
    pairs = items // q_tiles
    first = idx // (head_group * q_tiles) * head_group
    size = gl.minimum(pairs - first, head_group)
    rest = idx - first * q_tiles
    return first + rest % size, q_tiles - 1 - rest // size


@gluon.jit
def _item_count(schedule, CAUSAL: gl.constexpr):
    first, stride, items, _, _, _, table = schedule
    if CAUSAL:  # noqa: SIM108
        count = gl.load(table + first + 1) - gl.load(table + first)
    else:
        count = gl.cdiv(items - first, stride)
    return count


@gluon.jit
def _item_at(t, schedule, CAUSAL: gl.constexpr):
    first, stride, items, heads, q_tiles, head_group, table = schedule
    if CAUSAL:
        bh, m_tile = _launch_order_item(gl.load(table + gl.load(table + first) + t), items, q_tiles, head_group)
    else:
        item = first + t * stride
        bh = item // q_tiles
        m_tile = item % q_tiles
    return bh // heads, bh % heads, m_tile, t % 2, (t // 2) & 1


@gluon.jit
def _loader(loader_args, q_bar, q_empty, schedule, CAUSAL: gl.constexpr, HEAD_DIM: gl.constexpr):
    q_desc, q128_desc, k_desc, v_desc, q_a, q_b, k_smem, v_smem, kv_ready, kv_empty, group, n_ctx = loader_args
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    NS: gl.constexpr = k_smem.shape[0]  # ring slots
    base = 0
    for t in range(_item_count(schedule, CAUSAL)):
        b, h, m_tile, buf, q_phase = _item_at(t, schedule, CAUSAL)
        mbarrier.wait(q_empty.index(buf), q_phase ^ 1)
        hk = h // group
        bar = q_bar.index(buf)
        mbarrier.expect(bar, ITEM_ROWS * HEAD_DIM * 2)
        piece = q_a.index(buf).reshape([1, 1, DEFAULT_ROWS, HEAD_DIM])
        tma.async_copy_global_to_shared(q128_desc, [b, h, m_tile * ITEM_ROWS, 0], bar, piece)
        piece = q_b.index(buf).reshape([1, 1, WORKER_ROWS, HEAD_DIM])
        tma.async_copy_global_to_shared(q_desc, [b, h, m_tile * ITEM_ROWS + DEFAULT_ROWS, 0], bar, piece)
        n_kv = _key_tiles(m_tile, n_ctx, CAUSAL, BLOCK_N)
        for j in range(n_kv):
            slot = (base + j) % NS
            phase = (((base + j) // NS) & 1) ^ 1
            mbarrier.wait(kv_empty.index(slot), phase)
            ready = kv_ready.index(slot)
            mbarrier.expect(ready, 2 * BLOCK_N * HEAD_DIM * 2)
            tma.async_copy_global_to_shared(
                k_desc, [b, hk, j * BLOCK_N, 0], ready, k_smem.index(slot).reshape([1, 1, BLOCK_N, HEAD_DIM])
            )
            tma.async_copy_global_to_shared(
                v_desc, [b, hk, j * BLOCK_N, 0], ready, v_smem.index(slot).reshape([1, 1, BLOCK_N, HEAD_DIM])
            )
        base += n_kv


@gluon.jit
def _consume_item(consumer_args, q, q_bar, q_phase, b, h, m_tile, base, CAUSAL: gl.constexpr,
                  HEAD_DIM: gl.constexpr, ROWS: gl.constexpr, ROW_OFFSET: gl.constexpr):
    o_desc, lse_ptr, ones_smem, k_smem, v_smem, kv_ready, kv_empty, heads, n_ctx, qk_scale_log2, kv_off, _, ready_off = consumer_args
    WARPS: gl.constexpr = ROWS // 16
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    NS: gl.constexpr = k_smem.shape[0]  # ring slots
    s_layout: gl.constexpr = _acc_layout(ROWS, BLOCK_N)
    o_layout: gl.constexpr = _acc_layout(ROWS, HEAD_DIM)
    sums_layout: gl.constexpr = _acc_layout(ROWS, ONES_WIDTH)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    p_sums_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=sums_layout, k_width=2)
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    dtype: gl.constexpr = q.dtype

    r0 = m_tile * ITEM_ROWS + ROW_OFFSET
    rows = r0 + gl.arange(0, ROWS, layout=row_layout)
    offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    n_kv = _key_tiles(m_tile, n_ctx, CAUSAL, BLOCK_N)
    masked_from = r0 // BLOCK_N if CAUSAL else n_ctx // BLOCK_N
    mbarrier.wait(q_bar, q_phase)

    zero_s = gl.zeros([ROWS, BLOCK_N], gl.float32, s_layout)
    m_i = gl.full([ROWS], float("-inf"), gl.float32, row_layout)
    l_i = warpgroup_mma_init(gl.zeros([ROWS, ONES_WIDTH], gl.float32, sums_layout))
    acc = warpgroup_mma_init(gl.zeros([ROWS, HEAD_DIM], gl.float32, o_layout))
    for j in range(n_kv):
        slot = (base + j) % NS
        acc, l_i = warpgroup_mma_wait(num_outstanding=0, deps=(acc, l_i))
        if j > 0:
            _release(kv_off + 8 * ((base + j - 1) % NS), WARPS)
        _wait(ready_off + 8 * slot, ((base + j) // NS) & 1, WARPS)
        s = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
        if j >= masked_from:
            keys = j * BLOCK_N + offs_n
            visible = (keys < n_ctx)[None, :]
            if CAUSAL:
                visible = visible & ((keys[None, :] - rows[:, None]) <= 0)
            s2 = gl.where(visible, s * qk_scale_log2, float("-inf"))
            m_new = gl.maximum(m_i, gl.max(s2, 1))
            p = gl.exp2(s2 - m_new[:, None])
        else:
            m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale_log2)
            p = gl.exp2(s * qk_scale_log2 - m_new[:, None])
        alpha = gl.exp2(m_i - m_new)
        m_i = m_new
        l_i = l_i * gl.convert_layout(alpha, gl.SliceLayout(1, sums_layout))[:, None]
        acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
        p_op = gl.convert_layout(p.to(dtype), p_layout)
        p_sums = gl.convert_layout(p.to(dtype), p_sums_layout)
        l_i = warpgroup_mma(p_sums, ones_smem.permute((1, 0)), l_i, is_async=True)
        acc = warpgroup_mma(p_op, v_smem.index(slot), acc, is_async=True)
    acc, l_i = warpgroup_mma_wait(num_outstanding=0, deps=(acc, l_i))
    l_row = gl.convert_layout(gl.max(l_i, 1), row_layout)
    _release(kv_off + 8 * ((base + n_kv - 1) % NS), WARPS)
    gl.store(lse_ptr + (b * heads + h) * n_ctx + rows, m_i * LN_2 + gl.log(l_row), mask=rows < n_ctx)
    o = acc / gl.convert_layout(l_row, gl.SliceLayout(1, o_layout))[:, None]
    q.store(o.to(dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(o_desc, [b, h, r0, 0], q.reshape([1, 1, ROWS, HEAD_DIM]))
    tma.store_wait(pendings=0)
    return base + n_kv


@gluon.jit
def _consumer(consumer_args, q_smem, q_bar, q_empty, schedule, CAUSAL: gl.constexpr, HEAD_DIM: gl.constexpr,
              ROWS: gl.constexpr, ROW_OFFSET: gl.constexpr):
    base = 0
    for t in range(_item_count(schedule, CAUSAL)):
        b, h, m_tile, buf, q_phase = _item_at(t, schedule, CAUSAL)
        q = q_smem.index(buf)
        base = _consume_item(consumer_args, q, q_bar.index(buf), q_phase, b, h, m_tile, base, CAUSAL, HEAD_DIM,
                             ROWS, ROW_OFFSET)
        _release(consumer_args[11] + 8 * buf, ROWS // 16)


@gluon.jit
def _kernel(q_desc, q128_desc, k_desc, v_desc, o_desc, o128_desc, lse_ptr, schedule_table, items, heads, group, n_ctx, head_group,
            qk_scale_log2, CAUSAL: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr,
            WORKER_REGS: gl.constexpr = 144, STAGES: gl.constexpr = 2, KV_EMPTY_OFF: gl.constexpr = 0, Q_EMPTY_OFF: gl.constexpr = 0, KV_READY_OFF: gl.constexpr = 0):
    q_tiles = gl.cdiv(n_ctx, ITEM_ROWS)
    pid = gl.program_id(0)
    schedule = (pid, gl.num_programs(0), items, heads, q_tiles, head_group, schedule_table)
    dtype: gl.constexpr = q_desc.dtype
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([DEFAULT_ROWS, HEAD_DIM], dtype)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    q_a = gl.allocate_shared_memory(dtype, [2, DEFAULT_ROWS, HEAD_DIM], q_layout)  # the default partition's rows
    q_b = gl.allocate_shared_memory(dtype, [2, WORKER_ROWS, HEAD_DIM], q_layout)  # the worker's
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    kv_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(q_bar.index(i), count=1)
        mbarrier.init(q_empty.index(i), count=CONSUMER_WARPS)
    for i in gl.static_range(STAGES):
        mbarrier.init(kv_ready.index(i), count=1)
        mbarrier.init(kv_empty.index(i), count=CONSUMER_WARPS)
    ones_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([ONES_WIDTH, BLOCK_N], dtype)
    ones_smem = gl.allocate_shared_memory(dtype, [ONES_WIDTH, BLOCK_N], ones_layout)
    ones_regs: gl.constexpr = gl.BlockedLayout([1, 8], [2, 16], [4, 1], [1, 0])
    ones_smem.store(gl.full([ONES_WIDTH, BLOCK_N], 1.0, dtype, ones_regs))
    fence_async_shared()
    consumer_args = (o_desc, lse_ptr, ones_smem, k_smem, v_smem, kv_ready, kv_empty, heads, n_ctx, qk_scale_log2, KV_EMPTY_OFF, Q_EMPTY_OFF, KV_READY_OFF)
    consumer_args_a = (o128_desc, lse_ptr, ones_smem, k_smem, v_smem, kv_ready, kv_empty, heads, n_ctx, qk_scale_log2, KV_EMPTY_OFF, Q_EMPTY_OFF, KV_READY_OFF)
    loader_args = (q_desc, q128_desc, k_desc, v_desc, q_a, q_b, k_smem, v_smem, kv_ready, kv_empty, group, n_ctx)
    gl.warp_specialize(
        [
            (_consumer, (consumer_args, q_b, q_bar, q_empty, schedule, CAUSAL, HEAD_DIM, WORKER_ROWS,
                         DEFAULT_ROWS)),
            (_consumer, (consumer_args_a, q_a, q_bar, q_empty, schedule, CAUSAL, HEAD_DIM, DEFAULT_ROWS, 0)),
            (_loader, (loader_args, q_bar, q_empty, schedule, CAUSAL, HEAD_DIM)),
        ],
        [8, LOADER_WARPS],
        [WORKER_REGS, LOADER_REGS],
    )


def barrier_offsets(ptx):
    """(KV_EMPTY_OFF, Q_EMPTY_OFF, KV_READY_OFF): byte offsets in global_smem of kv_empty[0], q_empty[0] and
    kv_ready[0], read from a compile's PTX by the inits' program order (q_bar[0], q_empty[0], q_bar[1],
    q_empty[1], then kv_ready[i], kv_empty[i] for each slot)."""
    import re

    inits = re.findall(r"add\.s32\s+(%r\d+), %r\d+, (\d+);\s*\n\s*// begin inline asm\s*\n\s*@%p\d+ mbarrier\.init\.shared::cta\.b64 \[(%r\d+)\], (\d+);", ptx)
    o = [int(off) for r, off, r2, c in inits if r == r2]
    return o[5], o[1], o[4]
