"""Scratch probe: a five-product attention backward in Gluon (Triton 3.6), dQ by atomic adds.

Non-causal, (B, H, N, D) contiguous bf16, N a multiple of 64. One program per 64 keys of one
(batch, head), one warpgroup. K and V stay in shared memory; Q and dO tiles come through TMA
into two-slot rings. Per query tile: S^T = K Q^T and dP^T = V dO^T issued back to back (async),
P^T from L, dV += P^T dO, dS^T = P^T (dP^T - Delta), dK += dS^T Q, dS^T stored to shared memory,
dQ_tile = dS K (A operand from shared memory, transposed) added to an fp32 workspace with relaxed
atomics. Timed against flashattn2's two-kernel Triton backward and SDPA cuDNN, same process.
"""
import json, os
import torch, triton
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.experimental.gluon.language.nvidia.hopper import tma, mbarrier, fence_async_shared, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma_init

from triton._C.libtriton import ir
from triton.experimental.gluon.language._core import builtin

from flashattn2._triton_forward import triton_forward
from flashattn2._triton_backward import triton_backward


@builtin
def tma_reduce_add(tensor_desc, coord, src, _semantic=None):
    """Bulk TMA reduce-add of a shared-memory tile into global memory (Gluon 3.6 has the op but no wrapper)."""
    coord = _semantic._convert_to_ir_values(coord, require_i64=False)
    kind = ir.DESCRIPTOR_REDUCE_KIND.ADD
    try:
        _semantic.builder.create_async_tma_reduce(kind, tensor_desc.handle, coord, src.handle)
    except TypeError:
        _semantic.builder.create_async_tma_reduce(tensor_desc.handle, coord, src.handle, kind)


@gluon.jit
def _gluon_backward(q_desc, k_desc, v_desc, do_desc, dq_desc, lse_ptr, delta_ptr, dq_ptr, dk_ptr, dv_ptr,
                    N, qk_scale_log2, softmax_scale, dq_rows,
                    DQ_MODE: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, num_warps: gl.constexpr):
    pid_n = gl.program_id(0)
    pid_bh = gl.program_id(1)
    row0 = pid_bh * N
    k_row = row0 + pid_n * BLOCK_N

    st_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_M, 16])
    kv_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, HEAD_DIM, 16])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=kv_layout, k_width=2)
    col_layout: gl.constexpr = gl.SliceLayout(0, st_layout)  # one value per query (column of S^T)

    k_smem = gl.allocate_shared_memory(k_desc.dtype, [BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(v_desc.dtype, [BLOCK_N, HEAD_DIM], v_desc.layout)
    q_smem = gl.allocate_shared_memory(q_desc.dtype, [2, BLOCK_M, HEAD_DIM], q_desc.layout)
    do_smem = gl.allocate_shared_memory(do_desc.dtype, [2, BLOCK_M, HEAD_DIM], do_desc.layout)
    ds_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_M], gl.bfloat16)
    ds_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_N, BLOCK_M], ds_layout)
    dq_smem = gl.allocate_shared_memory(gl.float32, [BLOCK_M, HEAD_DIM], dq_desc.layout)
    kv_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar, count=1)
    for i in gl.static_range(2):
        mbarrier.init(bars.index(i), count=1)

    tile_bytes: gl.constexpr = BLOCK_M * HEAD_DIM * 2
    mbarrier.expect(kv_bar, 2 * BLOCK_N * HEAD_DIM * 2)
    tma.async_copy_global_to_shared(k_desc, [k_row, 0], kv_bar, k_smem)
    tma.async_copy_global_to_shared(v_desc, [k_row, 0], kv_bar, v_smem)
    mbarrier.expect(bars.index(0), 2 * tile_bytes)
    tma.async_copy_global_to_shared(q_desc, [row0, 0], bars.index(0), q_smem.index(0))
    tma.async_copy_global_to_shared(do_desc, [row0, 0], bars.index(0), do_smem.index(0))

    zero_st = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, st_layout)
    zero_dq = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, kv_layout)
    dk = warpgroup_mma_init(gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, kv_layout))
    dv = warpgroup_mma_init(gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, kv_layout))
    rows_dq = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, kv_layout))
    cols_dq = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, kv_layout))
    offs_col = gl.arange(0, BLOCK_M, layout=col_layout)
    mbarrier.wait(kv_bar, 0)

    n_tiles = N // BLOCK_M
    for j in range(n_tiles):
        slot = j % 2
        other = 1 - slot
        # Prefetch the next query tile into the other slot: its last readers (step j - 1) were waited for.
        has_next = j + 1 < n_tiles
        mbarrier.expect(bars.index(other), 2 * tile_bytes, pred=has_next)
        tma.async_copy_global_to_shared(q_desc, [row0 + (j + 1) * BLOCK_M, 0], bars.index(other), q_smem.index(other), pred=has_next)
        tma.async_copy_global_to_shared(do_desc, [row0 + (j + 1) * BLOCK_M, 0], bars.index(other), do_smem.index(other), pred=has_next)
        m0 = j * BLOCK_M
        lse2 = gl.load(lse_ptr + row0 + m0 + offs_col) * 1.4426950408889634
        delta = gl.load(delta_ptr + row0 + m0 + offs_col)
        mbarrier.wait(bars.index(slot), (j // 2) & 1)
        q_t = q_smem.index(slot)
        do_t = do_smem.index(slot)
        st = warpgroup_mma(k_smem, q_t.permute((1, 0)), zero_st, use_acc=False, is_async=True)
        dpt = warpgroup_mma(v_smem, do_t.permute((1, 0)), zero_st, use_acc=False, is_async=True)
        st = warpgroup_mma_wait(num_outstanding=1, deps=(st, ))
        pt = gl.exp2(st * qk_scale_log2 - lse2[None, :])
        pt_op = gl.convert_layout(pt.to(gl.bfloat16), a_layout)
        dv = warpgroup_mma(pt_op, do_t, dv, is_async=True)
        dpt = warpgroup_mma_wait(num_outstanding=1, deps=(dpt, ))
        dst = (pt * (dpt - delta[None, :])).to(gl.bfloat16)
        dk = warpgroup_mma(gl.convert_layout(dst, a_layout), q_t, dk, is_async=True)
        if DQ_MODE == 3:  # dQ added by a bulk TMA reduce-add from shared memory
            ds_smem.store(dst)
            fence_async_shared()
            gl.thread_barrier()
            dq_t = warpgroup_mma(ds_smem.permute((1, 0)), k_smem, zero_dq, use_acc=False, is_async=True)
            dq_t = warpgroup_mma_wait(num_outstanding=0, deps=(dq_t, ))
            tma.store_wait(pendings=0)
            dq_smem.store(dq_t * softmax_scale)
            fence_async_shared()
            gl.thread_barrier()
            tma_reduce_add(dq_desc, [row0 + m0, 0], dq_smem)
        elif DQ_MODE < 2:  # 0: dQ added with atomics; 1: dQ computed, its atomics predicated off; 2: no dQ
            ds_smem.store(dst)
            fence_async_shared()
            gl.thread_barrier()
            dq_t = warpgroup_mma(ds_smem.permute((1, 0)), k_smem, zero_dq, use_acc=False, is_async=True)
            dq_t = warpgroup_mma_wait(num_outstanding=0, deps=(dq_t, ))
            ptrs = dq_ptr + (row0 + m0 + rows_dq)[:, None] * HEAD_DIM + cols_dq[None, :]
            gl.atomic_add(ptrs, dq_t * softmax_scale, mask=(rows_dq < dq_rows)[:, None], sem="relaxed")
        else:
            dv = warpgroup_mma_wait(num_outstanding=0, deps=(dv, ))
            dv = warpgroup_mma_init(dv)
    tma.store_wait(pendings=0)
    dk = warpgroup_mma_wait(num_outstanding=0, deps=(dk, ))
    dv = warpgroup_mma_wait(num_outstanding=0, deps=(dv, ))
    rows_kv = k_row + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, kv_layout))
    offs_kv = rows_kv[:, None] * HEAD_DIM + cols_dq[None, :]
    gl.store(dk_ptr + offs_kv, (dk * softmax_scale).to(gl.bfloat16))
    gl.store(dv_ptr + offs_kv, dv.to(gl.bfloat16))


def gluon_backward(do, q, k, v, o, lse, scale, block_m=64, block_n=64, num_warps=4, dq_mode=0):
    b, h, n, d = q.shape
    delta = (o.float() * do.float()).sum(-1)
    dq = torch.zeros(b, h, n, d, device=q.device, dtype=torch.float32)
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    lay_m = gl.NVMMASharedLayout.get_default_for([block_m, d], gl.bfloat16)
    lay_n = gl.NVMMASharedLayout.get_default_for([block_n, d], gl.bfloat16)
    qd = TensorDescriptor.from_tensor(q.view(-1, d), [block_m, d], lay_m)
    dod = TensorDescriptor.from_tensor(do.view(-1, d), [block_m, d], lay_m)
    kd = TensorDescriptor.from_tensor(k.view(-1, d), [block_n, d], lay_n)
    vd = TensorDescriptor.from_tensor(v.view(-1, d), [block_n, d], lay_n)
    dqd = TensorDescriptor.from_tensor(dq.view(-1, d), [block_m, d], gl.NVMMASharedLayout.get_default_for([block_m, d], gl.float32))
    _gluon_backward[(n // block_n, b * h)](qd, kd, vd, dod, dqd, lse, delta, dq, dk, dv, n, scale * 1.4426950408889634, scale,
                                           block_m if dq_mode == 0 else 0, dq_mode, block_m, block_n, d, num_warps=num_warps)
    return dq.to(q.dtype), dk, dv


def main():
    out = []
    bench = lambda f: triton.testing.do_bench(f, warmup=30, rep=200, return_mode="median")
    for (b, h, n, d) in [(4, 16, 4096, 64), (4, 16, 4096, 128), (1, 16, 16384, 64)]:
        torch.manual_seed(0)
        q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        scale = d ** -0.5
        o, lse = triton_forward(q, k, v, False, scale)
        ref = triton_backward(g, q, k, v, o, lse, False, scale)
        row = {"shape": [b, h, n, d], "triton_bwd_ms": bench(lambda: triton_backward(g, q, k, v, o, lse, False, scale))}
        qs, ks, vs = (x.clone().requires_grad_(True) for x in (q, k, v))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            f = lambda: F.scaled_dot_product_attention(qs, ks, vs)
            oc = f()
            row["cudnn_bwd_ms"] = bench(lambda: torch.autograd.grad(oc, (qs, ks, vs), g, retain_graph=True))
        for bm, bn, w, mode in [(64, 64, 4, 3), (64, 64, 4, 0), (64, 64, 4, 1), (64, 64, 4, 2)]:
            key = f"gluon_{bm}x{bn}w{w}_dq{['atomics', 'no_atomics', 'none', 'tma_reduce'][mode]}"
            try:
                got = gluon_backward(g, q, k, v, o, lse, scale, bm, bn, w, mode)
                errs = [((a.float() - r.float()).abs().max() / r.float().abs().max()).item() for a, r in zip(got, ref)]
                row[key] = {"ms": bench(lambda: gluon_backward(g, q, k, v, o, lse, scale, bm, bn, w, mode)), "rel_err_vs_triton": errs}
            except Exception as e:
                row[key] = {"error": f"{type(e).__name__}: {str(e)[-1500:]}"}
        print(json.dumps(row), flush=True)
        out.append(row)
    json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "gluon_backward_probe.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
