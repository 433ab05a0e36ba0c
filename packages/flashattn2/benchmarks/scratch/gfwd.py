"""Scratch: a warp-specialized Hopper forward in Gluon (Triton 3.6).

One program per 128 query rows of one (batch, head): a loader warp brings Q once and K, V
tiles of 128 keys through a two-slot ring (TMA); two consumer warpgroups, each its own
partition, own 64 query rows each and run S = Q K^T, the online softmax and O += P V with P
from registers. The two warpgroups drift apart, so one's softmax overlaps the other's products
(FA3's ping-pong, arXiv:2407.08608, without its explicit ordering barriers).
Nq = Nk, fp16/bf16, head dim 64 or 128, bottom-right causal (= top-left when Nq = Nk).
"""

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
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

BLOCK_M = gl.constexpr(64)  # query rows per consumer warpgroup
STAGES = gl.constexpr(2)
LN2 = gl.constexpr(0.6931471805599453)


@gluon.jit
def _kv_tiles(m_tile, n_ctx, CAUSAL: gl.constexpr, CONSUMERS: gl.constexpr, BLOCK_N: gl.constexpr):
    tiles = gl.cdiv(n_ctx, BLOCK_N)
    if CAUSAL:
        # rows [m_tile * CONSUMERS * BLOCK_M, +CONSUMERS * BLOCK_M) see keys up to their last row
        tiles = gl.minimum(tiles, gl.cdiv((m_tile + 1) * CONSUMERS * BLOCK_M, BLOCK_N))
    return tiles


@gluon.jit
def _fwd_loader(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty,
                b, h, hk, m_tile, n_ctx, CAUSAL: gl.constexpr, HEAD_DIM: gl.constexpr, CONSUMERS: gl.constexpr,
                BLOCK_N: gl.constexpr):
    mbarrier.expect(q_bar, CONSUMERS * BLOCK_M * HEAD_DIM * 2)
    for w in gl.static_range(CONSUMERS):
        tma.async_copy_global_to_shared(
            q_desc, [b, h, (CONSUMERS * m_tile + w) * BLOCK_M, 0], q_bar, q_smem.index(w).reshape([1, 1, BLOCK_M, HEAD_DIM])
        )
    n_kv = _kv_tiles(m_tile, n_ctx, CAUSAL, CONSUMERS, BLOCK_N)
    for j in range(n_kv):
        slot = j % STAGES
        mbarrier.wait(kv_empty.index(slot), ((j // STAGES) & 1) ^ 1)
        mbarrier.expect(k_ready.index(slot), BLOCK_N * HEAD_DIM * 2)
        tma.async_copy_global_to_shared(
            k_desc, [b, hk, j * BLOCK_N, 0], k_ready.index(slot), k_smem.index(slot).reshape([1, 1, BLOCK_N, HEAD_DIM])
        )
        mbarrier.expect(v_ready.index(slot), BLOCK_N * HEAD_DIM * 2)
        tma.async_copy_global_to_shared(
            v_desc, [b, hk, j * BLOCK_N, 0], v_ready.index(slot), v_smem.index(slot).reshape([1, 1, BLOCK_N, HEAD_DIM])
        )


@gluon.jit
def _fwd_consumer(o_desc, lse_ptr, q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty,
                  b, h, heads, m_tile, n_ctx, qk_scale_log2,
                  CAUSAL: gl.constexpr, NEGATIVE_SCALE: gl.constexpr, HEAD_DIM: gl.constexpr,
                  WARPGROUP: gl.constexpr, CONSUMERS: gl.constexpr, BLOCK_N: gl.constexpr):
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    col_layout: gl.constexpr = gl.SliceLayout(0, s_layout)
    orow_layout: gl.constexpr = gl.SliceLayout(1, o_layout)
    dtype: gl.constexpr = q_smem.dtype

    r0 = (CONSUMERS * m_tile + WARPGROUP) * BLOCK_M
    rows = r0 + gl.arange(0, BLOCK_M, layout=row_layout)
    offs_n = gl.arange(0, BLOCK_N, layout=col_layout)
    q = q_smem.index(WARPGROUP)
    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, row_layout)
    l_i = gl.zeros([BLOCK_M], gl.float32, row_layout)
    acc = warpgroup_mma_init(gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout))
    n_kv = _kv_tiles(m_tile, n_ctx, CAUSAL, CONSUMERS, BLOCK_N)
    # key tiles from here on need a mask: those crossing this warpgroup's diagonal, and the ragged last one
    if CAUSAL:
        masked_from = r0 // BLOCK_N
    else:
        masked_from = n_ctx // BLOCK_N
    mbarrier.wait(q_bar, 0)
    for j in range(n_kv):
        slot = j % STAGES
        mbarrier.wait(k_ready.index(slot), (j // STAGES) & 1)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))  # P V of the previous tile: its P is free
        if j > 0:
            mbarrier.arrive(kv_empty.index((j - 1) % STAGES))
        s = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
        if j >= masked_from:
            keys = j * BLOCK_N + offs_n
            visible = (keys < n_ctx)[None, :]
            if CAUSAL:
                visible = visible & (keys[None, :] <= rows[:, None])
            sc = gl.where(visible, s * qk_scale_log2, float("-inf"))
            m_new = gl.maximum(m_i, gl.max(sc, 1))
            p = gl.exp2(sc - m_new[:, None])
        else:
            if NEGATIVE_SCALE:
                raw = gl.min(s, 1)
            else:
                raw = gl.max(s, 1)
            m_new = gl.maximum(m_i, raw * qk_scale_log2)
            p = gl.exp2(s * qk_scale_log2 - m_new[:, None])
        alpha = gl.exp2(m_i - m_new)
        l_i = l_i * alpha + gl.sum(p, 1)
        m_i = m_new
        acc = acc * gl.convert_layout(alpha, orow_layout)[:, None]
        p_op = gl.convert_layout(p.to(dtype), p_layout)
        mbarrier.wait(v_ready.index(slot), (j // STAGES) & 1)
        acc = warpgroup_mma(p_op, v_smem.index(slot), acc, is_async=True)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    lse = m_i * LN2 + gl.log(l_i)
    gl.store(lse_ptr + (b * heads + h) * n_ctx + rows, lse, mask=rows < n_ctx)
    o = acc / gl.convert_layout(l_i, orow_layout)[:, None]
    o_smem = q_smem.index(WARPGROUP)  # Q is no longer read: every S of this warpgroup is done
    o_smem.store(o.to(dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(o_desc, [b, h, r0, 0], o_smem.reshape([1, 1, BLOCK_M, HEAD_DIM]))
    tma.store_wait(pendings=0)


@gluon.jit
def _hopper_forward_kernel(q_desc, k_desc, v_desc, o_desc, lse_ptr, heads, group, n_ctx, qk_scale_log2,
                           CAUSAL: gl.constexpr, NEGATIVE_SCALE: gl.constexpr, HEAD_DIM: gl.constexpr,
                           CONSUMERS: gl.constexpr, BLOCK_N: gl.constexpr):
    n_m = gl.cdiv(n_ctx, CONSUMERS * BLOCK_M)
    if CAUSAL:
        m_tile = n_m - 1 - gl.program_id(0)  # the query tiles with the most keys first
    else:
        m_tile = gl.program_id(0)
    bh = gl.program_id(1)
    b = bh // heads
    h = bh % heads
    hk = h // group
    dtype: gl.constexpr = q_desc.dtype
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    q_smem = gl.allocate_shared_memory(dtype, [CONSUMERS, BLOCK_M, HEAD_DIM], q_layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(kv_empty.index(i), count=CONSUMERS)
    fence_async_shared()
    if CONSUMERS == 2:
        gl.warp_specialize(
            [
                (_fwd_consumer, (o_desc, lse_ptr, q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty,
                                 b, h, heads, m_tile, n_ctx, qk_scale_log2, CAUSAL, NEGATIVE_SCALE, HEAD_DIM, 0,
                                 CONSUMERS, BLOCK_N)),
                (_fwd_consumer, (o_desc, lse_ptr, q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty,
                                 b, h, heads, m_tile, n_ctx, qk_scale_log2, CAUSAL, NEGATIVE_SCALE, HEAD_DIM, 1,
                                 CONSUMERS, BLOCK_N)),
                (_fwd_loader, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty,
                               b, h, hk, m_tile, n_ctx, CAUSAL, HEAD_DIM, CONSUMERS, BLOCK_N)),
            ],
            [4, 1],
            [240, 64],  # a loader below 64 registers makes ptxas serialize every wgmma of the kernel
        )
    else:
        gl.warp_specialize(
            [
                (_fwd_consumer, (o_desc, lse_ptr, q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty,
                                 b, h, heads, m_tile, n_ctx, qk_scale_log2, CAUSAL, NEGATIVE_SCALE, HEAD_DIM, 0,
                                 CONSUMERS, BLOCK_N)),
                (_fwd_loader, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty,
                               b, h, hk, m_tile, n_ctx, CAUSAL, HEAD_DIM, CONSUMERS, BLOCK_N)),
            ],
            [1],
            [24],
        )


def hopper_forward(q, k, v, causal, scale, consumers=1, block_n=64, maxnreg=None):
    """(O, L) as triton_forward's: q (B, H, N, D), k, v (B, Hkv, N, D), TMA-ready strides."""
    b, h, n, d = q.shape
    o = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty(b, h, n, device=q.device, dtype=torch.float32)
    el = gl.bfloat16 if q.dtype == torch.bfloat16 else gl.float16
    lay_m = gl.NVMMASharedLayout.get_default_for([1, 1, 64, d], el)
    lay_n = gl.NVMMASharedLayout.get_default_for([1, 1, block_n, d], el)
    extra = {} if maxnreg is None else {"maxnreg": maxnreg}
    _hopper_forward_kernel[(triton.cdiv(n, 64 * consumers), b * h)](
        TensorDescriptor.from_tensor(q, [1, 1, 64, d], lay_m),
        TensorDescriptor.from_tensor(k, [1, 1, block_n, d], lay_n),
        TensorDescriptor.from_tensor(v, [1, 1, block_n, d], lay_n),
        TensorDescriptor.from_tensor(o, [1, 1, 64, d], lay_m),
        lse, h, h // k.shape[1], n, scale * 1.4426950408889634,
        CAUSAL=causal, NEGATIVE_SCALE=scale < 0, HEAD_DIM=d, CONSUMERS=consumers, BLOCK_N=block_n, num_warps=4,
        **extra,
    )
    return o, lse
