"""scratch (v126): the non-causal D = 64 Hopper forward with three consumer warpgroups (192-row items) and no
loader warp: the first consumer also issues the TMA loads, LOOKAHEAD key tiles ahead of its own step, into a
ring of STAGES slots. 12 warps, so the kernel's register cap stays at 168 (v125: a loader warp pads the kernel
to 16 warps, whose cap of 128 makes ptxas serialize the products)."""

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
from flashattn2._gluon_forward import LN_2, ONES_WIDTH, _accumulator_layout, _softmax
from flashattn2._launch import CompiledLaunch
from flashattn2._tma import TmaDescriptor
from flashattn2._triton_common import LOG2_E

BLOCK_M = gl.constexpr(64)
CONSUMERS = gl.constexpr(3)
STAGES = gl.constexpr(4)
LOOKAHEAD = gl.constexpr(2)
BLOCK_N = 128
WORKER_REGS = gl.constexpr(160)


@gluon.jit
def _produce(g, pargs):
    """Issue ring step g: its K and V tiles, and the item's Q first where g starts an item."""
    q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, k_ready, v_ready, v_empty, q_bar, q_empty, sched = pargs
    first, stride, q_tiles, heads, group, n_kv = sched
    HEAD_DIM: gl.constexpr = q_smem.shape[2]
    BN: gl.constexpr = k_smem.shape[1]
    t = g // n_kv
    j = g % n_kv
    item = first + t * stride
    bh = item // q_tiles
    m_tile = item % q_tiles
    b = bh // heads
    h = bh % heads
    hk = h // group
    if j == 0:
        buf = t % 2
        mbarrier.wait(q_empty.index(buf), ((t // 2) & 1) ^ 1)
        mbarrier.expect(q_bar.index(buf), CONSUMERS * BLOCK_M * HEAD_DIM * 2)
        for w in gl.static_range(CONSUMERS):
            q_part = q_smem.index(CONSUMERS * buf + w).reshape([1, 1, BLOCK_M, HEAD_DIM])
            tma.async_copy_global_to_shared(
                q_desc, [b, h, (CONSUMERS * m_tile + w) * BLOCK_M, 0], q_bar.index(buf), q_part
            )
    slot = g % STAGES
    mbarrier.wait(v_empty.index(slot), ((g // STAGES) & 1) ^ 1)
    mbarrier.expect(k_ready.index(slot), BN * HEAD_DIM * 2)
    tma.async_copy_global_to_shared(
        k_desc, [b, hk, j * BN, 0], k_ready.index(slot), k_smem.index(slot).reshape([1, 1, BN, HEAD_DIM])
    )
    mbarrier.expect(v_ready.index(slot), BN * HEAD_DIM * 2)
    tma.async_copy_global_to_shared(
        v_desc, [b, hk, j * BN, 0], v_ready.index(slot), v_smem.index(slot).reshape([1, 1, BN, HEAD_DIM])
    )


@gluon.jit
def _catch_up(produced, g, total, pargs, PRODUCER: gl.constexpr):
    """Issue ring steps until every step up to g + LOOKAHEAD (or the last) is issued."""
    if PRODUCER:
        target = gl.minimum(g + LOOKAHEAD + 1, total)
        while produced < target:
            _produce(produced, pargs)
            produced += 1
    return produced


@gluon.jit
def _steps(q, ring, kv_empty, ones_smem, n_kv, base, softmax_args, produced, total, pargs, PRODUCER: gl.constexpr):
    k_smem, v_smem, k_ready, v_ready = ring
    HEAD_DIM: gl.constexpr = q.shape[1]
    BN: gl.constexpr = k_smem.shape[1]
    s_layout: gl.constexpr = _accumulator_layout(BN)
    o_layout: gl.constexpr = _accumulator_layout(HEAD_DIM)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    sums_layout: gl.constexpr = _accumulator_layout(ONES_WIDTH)
    p_sums_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=sums_layout, k_width=2)
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    o_row_layout: gl.constexpr = gl.SliceLayout(1, o_layout)
    dtype: gl.constexpr = q.dtype

    zero_s = gl.zeros([BLOCK_M, BN], gl.float32, s_layout)
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, row_layout)
    l_i = warpgroup_mma_init(gl.zeros([BLOCK_M, ONES_WIDTH], gl.float32, sums_layout))
    acc = warpgroup_mma_init(gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout))
    for j in range(n_kv):
        slot = (base + j) % STAGES
        acc, l_i = warpgroup_mma_wait(num_outstanding=0, deps=(acc, l_i))
        if j > 0:
            mbarrier.arrive(kv_empty.index((base + j - 1) % STAGES))
        produced = _catch_up(produced, base + j, total, pargs, PRODUCER)
        mbarrier.wait(k_ready.index(slot), ((base + j) // STAGES) & 1)
        s = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
        p, alpha, m_i = _softmax(s, j, m_i, softmax_args, False, False, BN)
        l_i = l_i * gl.convert_layout(alpha, gl.SliceLayout(1, sums_layout))[:, None]
        acc = acc * gl.convert_layout(alpha, o_row_layout)[:, None]
        p_op = gl.convert_layout(p.to(dtype), p_layout)
        p_sums = gl.convert_layout(p.to(dtype), p_sums_layout)
        l_i = warpgroup_mma(p_sums, ones_smem.permute((1, 0)), l_i, is_async=True)
        mbarrier.wait(v_ready.index(slot), ((base + j) // STAGES) & 1)
        acc = warpgroup_mma(p_op, v_smem.index(slot), acc, is_async=True)
    acc, l_i = warpgroup_mma_wait(num_outstanding=0, deps=(acc, l_i))
    l_i = gl.convert_layout(gl.max(l_i, 1), row_layout)
    mbarrier.arrive(kv_empty.index((base + n_kv - 1) % STAGES))
    return acc, l_i, m_i, produced


@gluon.jit
def _consumer(cargs, pargs, total, WARPGROUP: gl.constexpr, PRODUCER: gl.constexpr):
    o_desc, lse_ptr, ones_smem, q_smem, q_bar, q_empty, k_smem, v_smem, k_ready, v_ready, v_empty, n_ctx, qk = cargs
    _, _, _, _, _, _, _, _, _, _, _, sched = pargs
    first, stride, q_tiles, heads, group, n_kv = sched
    HEAD_DIM: gl.constexpr = q_smem.shape[2]
    BN: gl.constexpr = k_smem.shape[1]
    s_layout: gl.constexpr = _accumulator_layout(BN)
    o_layout: gl.constexpr = _accumulator_layout(HEAD_DIM)
    dtype: gl.constexpr = q_smem.dtype
    produced = first * 0  # an int32 tensor, carried through the loops
    items = total // n_kv
    for t in range(items):
        item = first + t * stride
        bh = item // q_tiles
        m_tile = item % q_tiles
        b = bh // heads
        h = bh % heads
        buf = t % 2
        base = t * n_kv
        produced = _catch_up(produced, base, total, pargs, PRODUCER)
        q = q_smem.index(CONSUMERS * buf + WARPGROUP)
        r0 = (CONSUMERS * m_tile + WARPGROUP) * BLOCK_M
        rows = r0 + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
        offs_n = gl.arange(0, BN, layout=gl.SliceLayout(0, s_layout))
        softmax_args = (rows, offs_n, n_ctx // BN, n_ctx, qk)
        mbarrier.wait(q_bar.index(buf), (t // 2) & 1)
        ring = (k_smem, v_smem, k_ready, v_ready)
        acc, l_i, m_i, produced = _steps(
            q, ring, v_empty, ones_smem, n_kv, base, softmax_args, produced, total, pargs, PRODUCER
        )
        gl.store(lse_ptr + (b * heads + h) * n_ctx + rows, m_i * LN_2 + gl.log(l_i), mask=rows < n_ctx)
        o = acc / gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))[:, None]
        q.store(o.to(dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(o_desc, [b, h, r0, 0], q.reshape([1, 1, BLOCK_M, HEAD_DIM]))
        tma.store_wait(pendings=0)
        mbarrier.arrive(q_empty.index(buf))


@gluon.jit
def _kernel(
    q_desc, k_desc, v_desc, o_desc, lse_ptr, items, heads, group, n_ctx, qk_scale_log2, HEAD_DIM: gl.constexpr,
    BN: gl.constexpr
):
    q_tiles = gl.cdiv(n_ctx, CONSUMERS * BLOCK_M)
    first = gl.program_id(0)
    stride = gl.num_programs(0)
    n_kv = gl.cdiv(n_ctx, BN)
    total = gl.cdiv(items - first, stride) * n_kv
    dtype: gl.constexpr = q_desc.dtype
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BN, HEAD_DIM], dtype)
    q_smem = gl.allocate_shared_memory(dtype, [CONSUMERS * 2, BLOCK_M, HEAD_DIM], q_layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BN, HEAD_DIM], kv_layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BN, HEAD_DIM], kv_layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(q_bar.index(i), count=1)
        mbarrier.init(q_empty.index(i), count=CONSUMERS)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(v_empty.index(i), count=CONSUMERS)
    ones_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([ONES_WIDTH, BN], dtype)
    ones_smem = gl.allocate_shared_memory(dtype, [ONES_WIDTH, BN], ones_layout)
    ones_regs: gl.constexpr = gl.BlockedLayout([1, 8], [2, 16], [4, 1], [1, 0])
    ones_smem.store(gl.full([ONES_WIDTH, BN], 1.0, dtype, ones_regs))
    fence_async_shared()
    sched = (first, stride, q_tiles, heads, group, n_kv)
    pargs = (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, k_ready, v_ready, v_empty, q_bar, q_empty, sched)
    cargs = (o_desc, lse_ptr, ones_smem, q_smem, q_bar, q_empty, k_smem, v_smem, k_ready, v_ready, v_empty, n_ctx,
             qk_scale_log2)
    gl.warp_specialize(
        [
            (_consumer, (cargs, pargs, total, 0, False)),
            (_consumer, (cargs, pargs, total, 1, False)),
            (_consumer, (cargs, pargs, total, 2, False)),
        ],
        [4, 4],
        [WORKER_REGS, WORKER_REGS],
    )


class Forward3:
    """Non-causal D = 64 forward(q, k, v, out, lse) with three consumers and no loader warp."""

    def __init__(self, q_shape, k_shape, dtype, device, softmax_scale: float):
        batch, heads, n, head_dim = q_shape
        assert head_dim == 64
        q_tiles = triton.cdiv(n, CONSUMERS.value * BLOCK_M.value)
        self.items = q_tiles * batch * heads
        self.grid = (min(self.items, _hopper.usable_multiprocessors(device)),)
        self.kernel = CompiledLaunch(
            _kernel,
            (*self.grid, 1, 1),
            (self.items, heads, heads // k_shape[1], n, softmax_scale * LOG2_E),
            {"HEAD_DIM": head_dim, "BN": BLOCK_N},
            Tile(CONSUMERS.value * BLOCK_M.value, BLOCK_N, 4, 1),
            device,
        )
        element = gl.bfloat16 if dtype == torch.bfloat16 else gl.float16
        q_block, kv_block = [1, 1, BLOCK_M.value, head_dim], [1, 1, BLOCK_N, head_dim]
        q_layout = gl.NVMMASharedLayout.get_default_for(q_block, element)
        kv_layout = gl.NVMMASharedLayout.get_default_for(kv_block, element)
        self.descriptors = (
            TmaDescriptor(q_block, q_layout),
            TmaDescriptor(kv_block, kv_layout),
            TmaDescriptor(kv_block, kv_layout),
            TmaDescriptor(q_block, q_layout),
        )

    def __call__(self, q, k, v, out, lse) -> None:
        dq, dk, dv, do = self.descriptors
        self.kernel(dq(q), dk(k), dv(v), do(out), lse)
