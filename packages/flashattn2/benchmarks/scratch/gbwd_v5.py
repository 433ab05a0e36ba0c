"""NOTES v34: CHAINS interleaved deterministic chains (key tile n adds into dQ copy n % CHAINS, ordered within its copy;
the copies summed at the end). Otherwise as gbwd_v4: NOTES v26, v30 (scratch; HV bit 256: L and Delta by TMA with the Q/dO ring): v22/v24 with ORDER=1 (dQ issued before dK; the dQ store to shared memory overlaps the dK product),
NOREDUCE=1 (diagnostic: the writer hands back buffers without adding them), KSLICE=1 (dQ reads K's column halves in place
instead of a second copy: the D = 128 shared-memory budget); DIAG, DQ_BUFS as in v24."""
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

LOG2_E = 1.4426950408889634


@triton.jit
def _delta_kernel(o_ptr, do_ptr, delta_ptr, rows, HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    c = tl.arange(0, HEAD_DIM)
    m = (r < rows)[:, None]
    o = tl.load(o_ptr + r[:, None] * HEAD_DIM + c[None, :], mask=m, other=0.0).to(tl.float32)
    do = tl.load(do_ptr + r[:, None] * HEAD_DIM + c[None, :], mask=m, other=0.0).to(tl.float32)
    tl.store(delta_ptr + r, tl.sum(o * do, 1), mask=r < rows)


def delta_triton(o, do):
    """Row sums of O * dO in fp32: (B, H, N, D) contiguous -> (B, H, N)."""
    rows = o.numel() // o.shape[-1]
    delta = torch.empty(o.shape[:-1], device=o.device, dtype=torch.float32)
    _delta_kernel[(triton.cdiv(rows, 128), )](o, do, delta, rows, o.shape[-1], 128, num_warps=4)
    return delta


@builtin
def tma_reduce_add(tensor_desc, coord, src, _semantic=None):
    coord = _semantic._convert_to_ir_values(coord, require_i64=False)
    _semantic.builder.create_async_tma_reduce(ir.DESCRIPTOR_REDUCE_KIND.ADD, tensor_desc.handle, coord, src.handle)


@gluon.jit
def _asm_fence(ASM: gl.constexpr):
    one: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    x = gl.full([32], 0, gl.int32, one)
    gl.inline_asm_elementwise(ASM + " mov.u32 $0, $1;", "=r,r", [x], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _query_tile(n, step, key_tiles, CAUSAL: gl.constexpr, RATIO: gl.constexpr):
    if CAUSAL:
        return RATIO * n + step
    else:
        return (RATIO * n + step) % (RATIO * key_tiles)


@gluon.jit
def _steps(n, q_tiles, key_tiles, CAUSAL: gl.constexpr, RATIO: gl.constexpr):
    if CAUSAL:
        return q_tiles - RATIO * n
    else:
        return RATIO * key_tiles


@gluon.jit
def _loader(q_desc, k_desc, v_desc, do_desc, kd_desc, ls_desc, dl_desc, q_smem, do_smem, k_smem, v_smem, kd_smem, ld_smem,
            kv_bar, q_ready, q_empty, b, hk, n, group, heads, n_ctx, q_tiles, key_tiles,
            CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
            STAGES: gl.constexpr, KSLICE: gl.constexpr, HV: gl.constexpr):
    RATIO: gl.constexpr = BLOCK_N // BLOCK_M
    mbarrier.expect(kv_bar, (3 - KSLICE) * BLOCK_N * HEAD_DIM * 2)
    for h in gl.static_range(2 - 2 * KSLICE):
        tma.async_copy_global_to_shared(kd_desc, [b, hk, n * BLOCK_N, h * (HEAD_DIM // 2)], kv_bar,
                                        kd_smem.index(h).reshape([1, 1, BLOCK_N, HEAD_DIM // 2]))
    tma.async_copy_global_to_shared(k_desc, [b, hk, n * BLOCK_N, 0], kv_bar, k_smem.reshape([1, 1, BLOCK_N, HEAD_DIM]))
    tma.async_copy_global_to_shared(v_desc, [b, hk, n * BLOCK_N, 0], kv_bar, v_smem.reshape([1, 1, BLOCK_N, HEAD_DIM]))
    steps = _steps(n, q_tiles, key_tiles, CAUSAL, RATIO)
    it = 0
    for g in range(group):
        hq = hk * group + g
        for s in range(steps):
            j = _query_tile(n, s, key_tiles, CAUSAL, RATIO)
            if j < q_tiles:
                slot = it % STAGES
                mbarrier.wait(q_empty.index(slot), ((it // STAGES) & 1) ^ 1)
                if (HV & 256) != 0:  # L and Delta of the query tile come with Q and dO (fp32, 4 bytes each)
                    mbarrier.expect(q_ready.index(slot), 2 * BLOCK_M * HEAD_DIM * 2 + 2 * BLOCK_M * 4)
                    row = (b * heads + hq) * n_ctx + j * BLOCK_M
                    tma.async_copy_global_to_shared(ls_desc, [row], q_ready.index(slot), ld_smem.index(2 * slot))
                    tma.async_copy_global_to_shared(dl_desc, [row], q_ready.index(slot), ld_smem.index(2 * slot + 1))
                else:
                    mbarrier.expect(q_ready.index(slot), 2 * BLOCK_M * HEAD_DIM * 2)
                tma.async_copy_global_to_shared(q_desc, [b, hq, j * BLOCK_M, 0], q_ready.index(slot),
                                                q_smem.index(slot).reshape([1, 1, BLOCK_M, HEAD_DIM]))
                tma.async_copy_global_to_shared(do_desc, [b, hq, j * BLOCK_M, 0], q_ready.index(slot),
                                                do_smem.index(slot).reshape([1, 1, BLOCK_M, HEAD_DIM]))
                it += 1


@gluon.jit
def _dq_writer(dq_desc, dq_smem, dq_full, dq_empty, sem_ptr, b, hk, n, group, heads, q_tiles, key_tiles, batch, CHAINS: gl.constexpr,
               CAUSAL: gl.constexpr, DETERMINISTIC: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
               HEAD_DIM: gl.constexpr, DIAG: gl.constexpr, DQ_BUFS: gl.constexpr, NOREDUCE: gl.constexpr, HV: gl.constexpr,
               W: gl.constexpr, NW: gl.constexpr):
    """Writer W of NW: adds the dQ tiles of steps it with it % NW == W."""
    RATIO: gl.constexpr = BLOCK_N // BLOCK_M
    if (HV & 16) != 0:
        group = 0
    steps = _steps(n, q_tiles, key_tiles, CAUSAL, RATIO)
    if DIAG != 0:
        group = 0
    it = 0
    prev_sem = sem_ptr
    prev_buf = 0
    for g in range(group):
        hq = hk * group + g
        for s in range(steps):
            j = _query_tile(n, s, key_tiles, CAUSAL, RATIO)
            if j < q_tiles and (it % NW) == W:
                buf = it % DQ_BUFS
                mbarrier.wait(dq_full.index(buf), (it // DQ_BUFS) & 1)
                if DETERMINISTIC:
                    sem = sem_ptr + (((n % CHAINS) * batch + b) * heads + hq) * q_tiles + j
                    done = gl.atomic_add(sem, 0, sem="acquire", scope="gpu")
                    if (HV & 4096) != 0:  # diagnostic, not ordered: no wait for the previous key tile
                        done = (s // RATIO) // CHAINS
                    while done < (s // RATIO) // CHAINS:
                        if (HV & 512) != 0:  # back off between polls: fewer atomics on the L2 slice that also adds dQ
                            _asm_fence("nanosleep.u32 64;")
                        if (HV & 1024) != 0:  # a longer back-off
                            _asm_fence("nanosleep.u32 1000;")
                        done = gl.atomic_add(sem, 0, sem="acquire", scope="gpu")
                    _asm_fence("fence.proxy.async.global;")
                if (HV & 2) != 0:  # the writer makes the consumers' stores visible to the async proxy
                    fence_async_shared()
                for h in gl.static_range(2 - 2 * NOREDUCE):
                    tma_reduce_add(dq_desc, [(n % CHAINS) * batch + b, hq, j * BLOCK_M, h * (HEAD_DIM // 2)],
                                   dq_smem.index(2 * buf + h).reshape([1, 1, BLOCK_M, HEAD_DIM // 2]))
                if DETERMINISTIC and (HV & 32) != 0:  # release the previous tile once its add has completed
                    _asm_fence("cp.async.bulk.wait_group 2;")  # each reduce above commits its own group
                    if it > 0:
                        gl.atomic_add(prev_sem, 1, sem="release", scope="gpu")
                        mbarrier.arrive(dq_empty.index(prev_buf))
                    prev_sem = sem
                    prev_buf = buf
                else:
                    if DETERMINISTIC:
                        if (HV & 2048) != 0:  # diagnostic, not ordered: release before the reduce completes
                            gl.atomic_add(sem, 1, sem="release", scope="gpu")
                            _asm_fence("cp.async.bulk.commit_group; cp.async.bulk.wait_group 0;")
                        else:
                            _asm_fence("cp.async.bulk.commit_group; cp.async.bulk.wait_group 0;")
                            gl.atomic_add(sem, 1, sem="release", scope="gpu")
                    else:
                        tma.store_wait(0)
                    mbarrier.arrive(dq_empty.index(buf))
            if j < q_tiles:
                it += 1
    if DETERMINISTIC and (HV & 32) != 0:
        if it > 0:
            _asm_fence("cp.async.bulk.wait_group 0;")
            gl.atomic_add(prev_sem, 1, sem="release", scope="gpu")


@gluon.jit
def _consumer(q_smem, do_smem, k_smem, v_smem, kd_smem, ds_smem, dq_smem, ld_smem, kv_bar, q_ready, q_empty, ds_ready, ds_free,
              dq_full, dq_empty, lse_ptr, delta_ptr, dk_ptr, dv_ptr, b, hk, n, group, heads, n_ctx, q_tiles, key_tiles,
              qk_scale_log2, softmax_scale, stride_dkb, stride_dkh, stride_dkn,
              CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
              STAGES: gl.constexpr, DS_BUFS: gl.constexpr, DIAG: gl.constexpr, DQ_BUFS: gl.constexpr, ORDER: gl.constexpr,
              KSLICE: gl.constexpr, HV: gl.constexpr, WG: gl.constexpr):
    """One warpgroup: keys [n * BLOCK_N + 64 * WG, +64) for dK, dV; columns [WG * D / 2, +D / 2) of dQ."""
    RATIO: gl.constexpr = BLOCK_N // BLOCK_M
    KEYS: gl.constexpr = 64
    HALF: gl.constexpr = HEAD_DIM // 2
    st_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_M, 16])
    kv_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16])
    dq_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HALF, 16])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=kv_layout, k_width=2)
    col_layout: gl.constexpr = gl.SliceLayout(0, st_layout)
    row_layout: gl.constexpr = gl.SliceLayout(1, st_layout)

    k_w = k_smem.slice(WG * KEYS, KEYS)
    v_w = v_smem.slice(WG * KEYS, KEYS)
    if KSLICE:
        k_half = k_smem.slice(WG * HALF, HALF, dim=1)
    else:
        k_half = kd_smem.index(WG)
    zero_st = gl.zeros([KEYS, BLOCK_M], gl.float32, st_layout)
    zero_dq = gl.zeros([BLOCK_M, HALF], gl.float32, dq_layout)
    dk = warpgroup_mma_init(gl.zeros([KEYS, HEAD_DIM], gl.float32, kv_layout))
    dv = warpgroup_mma_init(gl.zeros([KEYS, HEAD_DIM], gl.float32, kv_layout))
    offs_col = gl.arange(0, BLOCK_M, layout=col_layout)
    keys = n * BLOCK_N + WG * KEYS + gl.arange(0, KEYS, layout=row_layout)
    key_ok = keys < n_ctx
    steps = _steps(n, q_tiles, key_tiles, CAUSAL, RATIO)
    mbarrier.wait(kv_bar, 0)
    it = 0
    for g in range(group):
        hq = hk * group + g
        row0 = (b * heads + hq) * n_ctx
        for s in range(steps):
            j = _query_tile(n, s, key_tiles, CAUSAL, RATIO)
            if j < q_tiles:
                slot = it % STAGES
                queries = j * BLOCK_M + offs_col
                q_ok = queries < n_ctx
                if (HV & 256) == 0:
                    lse2 = gl.load(lse_ptr + row0 + queries, mask=q_ok, other=float("inf")) * 1.4426950408889634
                    delta = gl.load(delta_ptr + row0 + queries, mask=q_ok, other=0.0)
                mbarrier.wait(q_ready.index(slot), (it // STAGES) & 1)
                if (HV & 256) != 0:
                    lse2 = gl.where(q_ok, ld_smem.index(2 * slot).load(col_layout) * 1.4426950408889634, float("inf"))
                    delta = ld_smem.index(2 * slot + 1).load(col_layout)
                q_t = q_smem.index(slot)
                do_t = do_smem.index(slot)
                st = warpgroup_mma(k_w, q_t.permute((1, 0)), zero_st, use_acc=False, is_async=True)
                dpt = warpgroup_mma(v_w, do_t.permute((1, 0)), zero_st, use_acc=False, is_async=True)
                st = warpgroup_mma_wait(num_outstanding=1, deps=(st, ))
                if CAUSAL:
                    if s < RATIO:
                        st = gl.where(keys[:, None] <= queries[None, :], st, float("-inf"))
                if (n + 1) * BLOCK_N > n_ctx:
                    st = gl.where(key_ok[:, None], st, float("-inf"))
                pt = gl.exp2(st * qk_scale_log2 - lse2[None, :])
                pt_a = gl.convert_layout(pt.to(ds_smem.dtype), a_layout)
                if ORDER != 2:
                    dv = warpgroup_mma(pt_a, do_t, dv, is_async=True)
                    dpt = warpgroup_mma_wait(num_outstanding=1, deps=(dpt, ))
                else:
                    dpt = warpgroup_mma_wait(num_outstanding=0, deps=(dpt, ))
                dst = (pt * (dpt - delta[None, :])).to(ds_smem.dtype)
                dbuf = it % DS_BUFS
                if (HV & 128) != 0:  # the Q/dO slot and the dS buffer are freed together: one barrier for both
                    gl.static_assert(STAGES == DS_BUFS)
                    mbarrier.wait(q_empty.index(dbuf), ((it // DS_BUFS) & 1) ^ 1)
                else:
                    mbarrier.wait(ds_free.index(dbuf), ((it // DS_BUFS) & 1) ^ 1)
                ds_t = ds_smem.index(dbuf)
                ds_w = ds_t.slice(WG * KEYS, KEYS)
                ds_w.store(dst)
                fence_async_shared()
                if ORDER == 2:  # dV issued after the fence, so that no product is in flight when it runs
                    dv = warpgroup_mma(pt_a, do_t, dv, is_async=True)
                if ORDER == 1:  # dQ first: its hand-over runs while the tensor cores compute dK
                    mbarrier.arrive(ds_ready.index(dbuf))
                    mbarrier.wait(ds_ready.index(dbuf), (it // DS_BUFS) & 1)
                    dq = warpgroup_mma(ds_t.permute((1, 0)), k_half, zero_dq, use_acc=False, is_async=True)
                    dk = warpgroup_mma(ds_w, q_t, dk, is_async=True)
                    dq = warpgroup_mma_wait(num_outstanding=1, deps=(dq, ))
                    buf = it % DQ_BUFS
                    mbarrier.wait(dq_empty.index(buf), ((it // DQ_BUFS) & 1) ^ 1)
                    dq_smem.index(2 * buf + WG).store(dq * softmax_scale)
                    if (HV & 1) == 0:
                        fence_async_shared()
                    mbarrier.arrive(dq_full.index(buf))
                    dk = warpgroup_mma_wait(num_outstanding=0, deps=(dk, ))
                    dk = warpgroup_mma_init(dk)
                    mbarrier.arrive(ds_free.index(dbuf))
                    mbarrier.arrive(q_empty.index(slot))
                else:
                    dk = warpgroup_mma(ds_w, q_t, dk, is_async=True)
                    mbarrier.arrive(ds_ready.index(dbuf))
                    mbarrier.wait(ds_ready.index(dbuf), (it // DS_BUFS) & 1)
                    if DIAG == 1:  # four products: no dQ
                        dk = warpgroup_mma_wait(num_outstanding=0, deps=(dk, ))
                        dk = warpgroup_mma_init(dk)
                        mbarrier.arrive(ds_free.index(dbuf))
                        mbarrier.arrive(q_empty.index(slot))
                    else:
                        dq = warpgroup_mma(ds_t.permute((1, 0)), k_half, zero_dq, use_acc=False, is_async=True)
                        dq = warpgroup_mma_wait(num_outstanding=0, deps=(dq, ))
                        if (HV & 128) == 0:
                            mbarrier.arrive(ds_free.index(dbuf))
                        mbarrier.arrive(q_empty.index(slot))
                        if DIAG == 0:
                            buf = it % DQ_BUFS
                            if (HV & 8) == 0:
                                mbarrier.wait(dq_empty.index(buf), ((it // DQ_BUFS) & 1) ^ 1)
                            if (HV & 4) == 0:
                                dq_smem.index(2 * buf + WG).store(dq * softmax_scale)
                            if (HV & 1) == 0:
                                fence_async_shared()
                            if (HV & 16) == 0:
                                mbarrier.arrive(dq_full.index(buf))
                it += 1
    dk = warpgroup_mma_wait(num_outstanding=0, deps=(dk, ))
    dv = warpgroup_mma_wait(num_outstanding=0, deps=(dv, ))
    rows = n * BLOCK_N + WG * KEYS + gl.arange(0, KEYS, layout=gl.SliceLayout(1, kv_layout))
    cols = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, kv_layout))
    offs = b * stride_dkb + hk * stride_dkh + rows[:, None] * stride_dkn + cols[None, :]
    mask = (rows < n_ctx)[:, None]
    gl.store(dk_ptr + offs, (dk * softmax_scale).to(dk_ptr.dtype.element_ty), mask=mask)
    gl.store(dv_ptr + offs, dv.to(dv_ptr.dtype.element_ty), mask=mask)


@gluon.jit
def _attention_backward_kernel(q_desc, k_desc, v_desc, do_desc, kd_desc, dq_desc, ls_desc, dl_desc, lse_ptr, delta_ptr, dk_ptr, dv_ptr,
                               sem_ptr, ticket_ptr, heads, group, n_ctx, q_tiles, key_tiles, batch,
                               qk_scale_log2, softmax_scale, stride_dkb, stride_dkh, stride_dkn,
                               CAUSAL: gl.constexpr, DETERMINISTIC: gl.constexpr, BLOCK_M: gl.constexpr,
                               BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr,
                               DS_BUFS: gl.constexpr, DIAG: gl.constexpr, DQ_BUFS: gl.constexpr, DQ_SWIZZLE: gl.constexpr,
                               ORDER: gl.constexpr, NOREDUCE: gl.constexpr, KSLICE: gl.constexpr, HV: gl.constexpr, CHAINS: gl.constexpr,
                               num_warps: gl.constexpr):
    if DETERMINISTIC:  # work in the order programs start, so a program only waits on started ones
        item = gl.atomic_add(ticket_ptr, 1)
    else:
        item = gl.program_id(0)
    kv_heads = heads // group
    bhk = item // key_tiles
    n = item % key_tiles
    if (HV & 8192) != 0:  # key tiles in descending order: every program a tile waits on took an earlier ticket
        n = key_tiles - 1 - n
    b = bhk // kv_heads
    hk = bhk % kv_heads
    HALF: gl.constexpr = HEAD_DIM // 2

    dtype: gl.constexpr = q_desc.dtype
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    k_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], kv_layout)
    v_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], kv_layout)
    if KSLICE:
        kd_smem = k_smem  # unused: dQ reads K's column halves in place
    else:
        kd_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, HALF],
                                            gl.NVMMASharedLayout.get_default_for([BLOCK_N, HALF], dtype))
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    q_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_DIM], q_layout)
    do_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_DIM], q_layout)
    ds_smem = gl.allocate_shared_memory(dtype, [DS_BUFS, BLOCK_N, BLOCK_M],
                                        gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_M], dtype))
    dq_smem = gl.allocate_shared_memory(gl.float32, [2 * DQ_BUFS, BLOCK_M, HALF],
                                        gl.NVMMASharedLayout(swizzle_byte_width=DQ_SWIZZLE, element_bitwidth=32, rank=2))
    if (HV & 256) != 0:
        ld_smem = gl.allocate_shared_memory(gl.float32, [2 * STAGES, BLOCK_M],
                                            gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1))
    else:
        ld_smem = dq_smem
    kv_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    q_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    ds_ready = gl.allocate_shared_memory(gl.int64, [DS_BUFS, 1], mbarrier.MBarrierLayout())
    ds_free = gl.allocate_shared_memory(gl.int64, [DS_BUFS, 1], mbarrier.MBarrierLayout())
    dq_full = gl.allocate_shared_memory(gl.int64, [DQ_BUFS, 1], mbarrier.MBarrierLayout())
    dq_empty = gl.allocate_shared_memory(gl.int64, [DQ_BUFS, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(q_ready.index(i), count=1)
        mbarrier.init(q_empty.index(i), count=2)
    for i in gl.static_range(DS_BUFS):
        mbarrier.init(ds_ready.index(i), count=2)
        mbarrier.init(ds_free.index(i), count=2)
    for i in gl.static_range(DQ_BUFS):
        mbarrier.init(dq_full.index(i), count=2)
        mbarrier.init(dq_empty.index(i), count=1)
    fence_async_shared()

    NW: gl.constexpr = 2 if (HV & 64) != 0 else 1
    if NW == 2:
        gl.warp_specialize([
            (_consumer, (q_smem, do_smem, k_smem, v_smem, kd_smem, ds_smem, dq_smem, ld_smem, kv_bar, q_ready, q_empty, ds_ready,
                         ds_free, dq_full, dq_empty, lse_ptr, delta_ptr, dk_ptr, dv_ptr, b, hk, n, group, heads, n_ctx,
                         q_tiles, key_tiles, qk_scale_log2, softmax_scale, stride_dkb, stride_dkh, stride_dkn,
                         CAUSAL, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, DS_BUFS, DIAG, DQ_BUFS, ORDER, KSLICE, HV, 0)),
            (_consumer, (q_smem, do_smem, k_smem, v_smem, kd_smem, ds_smem, dq_smem, ld_smem, kv_bar, q_ready, q_empty, ds_ready,
                         ds_free, dq_full, dq_empty, lse_ptr, delta_ptr, dk_ptr, dv_ptr, b, hk, n, group, heads, n_ctx,
                         q_tiles, key_tiles, qk_scale_log2, softmax_scale, stride_dkb, stride_dkh, stride_dkn,
                         CAUSAL, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, DS_BUFS, DIAG, DQ_BUFS, ORDER, KSLICE, HV, 1)),
            (_loader, (q_desc, k_desc, v_desc, do_desc, kd_desc, ls_desc, dl_desc, q_smem, do_smem, k_smem, v_smem, kd_smem,
                       ld_smem, kv_bar, q_ready, q_empty, b, hk, n, group, heads, n_ctx, q_tiles, key_tiles, CAUSAL, BLOCK_M,
                       BLOCK_N, HEAD_DIM, STAGES, KSLICE, HV)),
            (_dq_writer, (dq_desc, dq_smem, dq_full, dq_empty, sem_ptr, b, hk, n, group, heads, q_tiles, key_tiles, batch, CHAINS,
                          CAUSAL, DETERMINISTIC, BLOCK_M, BLOCK_N, HEAD_DIM, DIAG, DQ_BUFS, NOREDUCE, HV, 0, NW)),
            (_dq_writer, (dq_desc, dq_smem, dq_full, dq_empty, sem_ptr, b, hk, n, group, heads, q_tiles, key_tiles, batch, CHAINS,
                          CAUSAL, DETERMINISTIC, BLOCK_M, BLOCK_N, HEAD_DIM, DIAG, DQ_BUFS, NOREDUCE, HV, 1, NW)),
        ], [4, 1, 1, 1], [240, 24, 24, 24])
    else:
        gl.warp_specialize([
            (_consumer, (q_smem, do_smem, k_smem, v_smem, kd_smem, ds_smem, dq_smem, ld_smem, kv_bar, q_ready, q_empty, ds_ready,
                         ds_free, dq_full, dq_empty, lse_ptr, delta_ptr, dk_ptr, dv_ptr, b, hk, n, group, heads, n_ctx,
                         q_tiles, key_tiles, qk_scale_log2, softmax_scale, stride_dkb, stride_dkh, stride_dkn,
                         CAUSAL, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, DS_BUFS, DIAG, DQ_BUFS, ORDER, KSLICE, HV, 0)),
            (_consumer, (q_smem, do_smem, k_smem, v_smem, kd_smem, ds_smem, dq_smem, ld_smem, kv_bar, q_ready, q_empty, ds_ready,
                         ds_free, dq_full, dq_empty, lse_ptr, delta_ptr, dk_ptr, dv_ptr, b, hk, n, group, heads, n_ctx,
                         q_tiles, key_tiles, qk_scale_log2, softmax_scale, stride_dkb, stride_dkh, stride_dkn,
                         CAUSAL, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, DS_BUFS, DIAG, DQ_BUFS, ORDER, KSLICE, HV, 1)),
            (_loader, (q_desc, k_desc, v_desc, do_desc, kd_desc, ls_desc, dl_desc, q_smem, do_smem, k_smem, v_smem, kd_smem,
                       ld_smem, kv_bar, q_ready, q_empty, b, hk, n, group, heads, n_ctx, q_tiles, key_tiles, CAUSAL, BLOCK_M,
                       BLOCK_N, HEAD_DIM, STAGES, KSLICE, HV)),
            (_dq_writer, (dq_desc, dq_smem, dq_full, dq_empty, sem_ptr, b, hk, n, group, heads, q_tiles, key_tiles, batch, CHAINS,
                          CAUSAL, DETERMINISTIC, BLOCK_M, BLOCK_N, HEAD_DIM, DIAG, DQ_BUFS, NOREDUCE, HV, 0, NW)),
        ], [4, 1, 1], [240, 24, 24])


def descriptors(q, k, v, do, dq_acc, block_m, block_n, dq_swizzle=0):
    d = q.shape[-1]
    el = gl.bfloat16 if q.dtype == torch.bfloat16 else gl.float16
    lay_m = gl.NVMMASharedLayout.get_default_for([1, 1, block_m, d], el)
    lay_n = gl.NVMMASharedLayout.get_default_for([1, 1, block_n, d], el)
    lay_h = gl.NVMMASharedLayout.get_default_for([1, 1, block_n, d // 2], el)
    return (TensorDescriptor.from_tensor(q, [1, 1, block_m, d], lay_m),
            TensorDescriptor.from_tensor(k, [1, 1, block_n, d], lay_n),
            TensorDescriptor.from_tensor(v, [1, 1, block_n, d], lay_n),
            TensorDescriptor.from_tensor(do, [1, 1, block_m, d], lay_m),
            TensorDescriptor.from_tensor(k, [1, 1, block_n, d // 2], lay_h),
            TensorDescriptor.from_tensor(dq_acc, [1, 1, block_m, d // 2],
                                         gl.NVMMASharedLayout(swizzle_byte_width=dq_swizzle, element_bitwidth=32, rank=4)
                                         if dq_swizzle else
                                         gl.NVMMASharedLayout.get_default_for([1, 1, block_m, d // 2], gl.float32)))


def gluon_backward(do, q, k, v, o, lse, causal, scale, deterministic=True, block_m=64, block_n=128, stages=2,
                   warmup_only=False, delta=None, diag=0, dq_bufs=None, dq_swizzle=0, order=None, noreduce=0, kslice=None,
                   ds_bufs=None, hv=None, chains=1):
    import os
    order = int(os.environ.get('GB_ORDER', '0')) if order is None else order
    hv = int(os.environ.get('GB_HV', '0')) if hv is None else hv
    dq_bufs = int(os.environ.get('GB_DQB', '2')) if dq_bufs is None else dq_bufs
    kslice = int(q.shape[-1] > 64) if kslice is None else kslice
    ds_bufs = (2 if q.shape[-1] <= 64 else 1) if ds_bufs is None else ds_bufs
    b, h, n_ctx, d = q.shape
    hkv = k.shape[1]
    if delta is None:
        delta = delta_triton(o, do)
    dq_acc = torch.zeros(chains * b, h, n_ctx, d, device=q.device, dtype=torch.float32)
    dk, dv = torch.empty(k.shape, device=k.device, dtype=k.dtype), torch.empty(k.shape, device=k.device, dtype=k.dtype)
    q_tiles, key_tiles = triton.cdiv(n_ctx, block_m), triton.cdiv(n_ctx, block_n)
    assert causal or key_tiles % chains == 0, 'the rotated walk needs key tiles divisible by chains'
    sem = torch.zeros(chains * b * h * q_tiles + 1, device=q.device, dtype=torch.int32)
    descs = descriptors(q, k, v, do, dq_acc, block_m, block_n, dq_swizzle)
    flat = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1)
    ld_descs = (TensorDescriptor.from_tensor(lse.reshape(-1), [block_m], flat),
                TensorDescriptor.from_tensor(delta.reshape(-1), [block_m], flat))
    args = (*descs, *ld_descs, lse, delta, dk, dv, sem, sem[-1:], h, h // hkv, n_ctx, q_tiles, key_tiles, b,
            scale * LOG2_E, scale, dk.stride(0), dk.stride(1), dk.stride(2),
            causal, deterministic, block_m, block_n, d, stages, ds_bufs, diag, dq_bufs, dq_swizzle or 128, order, noreduce,
            kslice, hv, chains)
    grid = (key_tiles * b * hkv, )
    if warmup_only:
        return _attention_backward_kernel.warmup(*args, num_warps=4, grid=grid)
    _attention_backward_kernel[grid](*args, num_warps=4)
    dq = dq_acc.to(q.dtype) if chains == 1 else dq_acc.view(chains, b, h, n_ctx, d).sum(0).to(q.dtype)
    return dq, dk, dv
