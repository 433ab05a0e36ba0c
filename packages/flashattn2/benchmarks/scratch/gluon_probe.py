"""Scratch probe: a Gluon (Triton 3.6) attention forward with explicit async wgmma, to test the route in NOTES.

Non-causal, (B, H, N, D) contiguous bf16, N a multiple of the tiles. One program per
BLOCK_M query rows of one (batch, head), 8 warps. K and V tiles come through TMA into
two-slot rings; the next tile's scores S(j+1) are issued (async) before the softmax of
S(j), and P(j) V(j) is issued async and waited for one step later, so the tensor cores
work while the softmax runs (FA3's intra-warpgroup overlap, arXiv:2407.08608).
Timed against flashattn2's Triton forward and SDPA cuDNN in the same process.
"""
import json, os, sys
import torch, triton
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.experimental.gluon.language.nvidia.hopper import tma, mbarrier, fence_async_shared, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma_init

from flashattn2._triton_forward import triton_forward


@gluon.jit
def _gluon_forward(q_desc, k_desc, v_desc, o_desc, lse_ptr, N, qk_scale_log2,
                   BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, OVERLAP: gl.constexpr,
                   num_warps: gl.constexpr):
    pid_m = gl.program_id(0)
    pid_bh = gl.program_id(1)
    row0 = pid_bh * N
    q_row = row0 + pid_m * BLOCK_M

    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    orow_layout: gl.constexpr = gl.SliceLayout(1, o_layout)

    q_smem = gl.allocate_shared_memory(q_desc.dtype, [BLOCK_M, HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(k_desc.dtype, [2, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(v_desc.dtype, [2, BLOCK_N, HEAD_DIM], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(2):
        mbarrier.init(k_bars.index(i), count=1)
        mbarrier.init(v_bars.index(i), count=1)

    n_tiles = N // BLOCK_N
    tile_bytes: gl.constexpr = BLOCK_N * HEAD_DIM * 2
    mbarrier.expect(q_bar, BLOCK_M * HEAD_DIM * 2)
    tma.async_copy_global_to_shared(q_desc, [q_row, 0], q_bar, q_smem)
    mbarrier.expect(k_bars.index(0), tile_bytes)
    tma.async_copy_global_to_shared(k_desc, [row0, 0], k_bars.index(0), k_smem.index(0))
    mbarrier.expect(v_bars.index(0), tile_bytes)
    tma.async_copy_global_to_shared(v_desc, [row0, 0], v_bars.index(0), v_smem.index(0))
    has_next = n_tiles > 1
    mbarrier.expect(k_bars.index(1), tile_bytes, pred=has_next)
    tma.async_copy_global_to_shared(k_desc, [row0 + BLOCK_N, 0], k_bars.index(1), k_smem.index(1), pred=has_next)

    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    mbarrier.wait(q_bar, 0)
    mbarrier.wait(k_bars.index(0), 0)
    s = warpgroup_mma(q_smem, k_smem.index(0).permute((1, 0)), zero_s, use_acc=False, is_async=True)
    s = warpgroup_mma_wait(num_outstanding=0, deps=(s, ))

    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, row_layout)
    l_i = gl.zeros([BLOCK_M], gl.float32, row_layout)
    acc = warpgroup_mma_init(gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout))  # carried as an async token
    for j in range(n_tiles):
        slot = j % 2
        other = 1 - slot
        # The next tile's scores, issued before this tile's softmax (a throwaway product on the last tile).
        mbarrier.wait(k_bars.index(other), ((j + 1) // 2) & 1, pred=j + 1 < n_tiles)
        s_next = warpgroup_mma(q_smem, k_smem.index(other).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        if not OVERLAP:  # no overlap: wait for it (and for P(j-1) V(j-1)) at once
            s_next = warpgroup_mma_wait(num_outstanding=0, deps=(s_next, ))
        m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale_log2)
        p = gl.exp2(s * qk_scale_log2 - m_new[:, None])
        alpha = gl.exp2(m_i - m_new)
        l_i = l_i * alpha + gl.sum(p, 1)
        m_i = m_new
        # P(j-1) V(j-1) done: its V slot is free, and this tile's K slot was read by S(j), long done.
        acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))
        mbarrier.expect(k_bars.index(slot), tile_bytes, pred=j + 2 < n_tiles)
        tma.async_copy_global_to_shared(k_desc, [row0 + (j + 2) * BLOCK_N, 0], k_bars.index(slot), k_smem.index(slot), pred=j + 2 < n_tiles)
        mbarrier.expect(v_bars.index(other), tile_bytes, pred=j + 1 < n_tiles)
        tma.async_copy_global_to_shared(v_desc, [row0 + (j + 1) * BLOCK_N, 0], v_bars.index(other), v_smem.index(other), pred=j + 1 < n_tiles)
        acc = acc * gl.convert_layout(alpha, orow_layout)[:, None]
        mbarrier.wait(v_bars.index(slot), (j // 2) & 1)
        p_op = gl.convert_layout(p.to(gl.bfloat16), p_layout)
        acc = warpgroup_mma(p_op, v_smem.index(slot), acc, is_async=True)
        s = warpgroup_mma_wait(num_outstanding=1, deps=(s_next, ))
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))

    l_o = gl.convert_layout(l_i, orow_layout)
    o = acc / l_o[:, None]
    lse = m_i * 0.6931471805599453 + gl.log(l_i)
    offs = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=row_layout)
    gl.store(lse_ptr + row0 + offs, lse)
    o_smem = gl.allocate_shared_memory(o_desc.dtype, [BLOCK_M, HEAD_DIM], o_desc.layout)
    o_smem.store(o.to(gl.bfloat16))
    fence_async_shared()
    tma.async_copy_shared_to_global(o_desc, [q_row, 0], o_smem)
    tma.store_wait(pendings=0)


def gluon_forward(q, k, v, scale, block_m=128, block_n=64, num_warps=8, overlap=True):
    b, h, n, d = q.shape
    o = torch.empty_like(q)
    lse = torch.empty(b, h, n, device=q.device, dtype=torch.float32)
    q2, k2, v2, o2 = (x.view(b * h * n, d) for x in (q, k, v, o))
    lay_q = gl.NVMMASharedLayout.get_default_for([block_m, d], gl.bfloat16)
    lay_k = gl.NVMMASharedLayout.get_default_for([block_n, d], gl.bfloat16)
    qd = TensorDescriptor.from_tensor(q2, [block_m, d], lay_q)
    kd = TensorDescriptor.from_tensor(k2, [block_n, d], lay_k)
    vd = TensorDescriptor.from_tensor(v2, [block_n, d], lay_k)
    od = TensorDescriptor.from_tensor(o2, [block_m, d], lay_q)
    _gluon_forward[(n // block_m, b * h)](qd, kd, vd, od, lse, n, scale * 1.4426950408889634,
                                          block_m, block_n, d, overlap, num_warps=num_warps)
    return o, lse


def main():
    out = []
    bench = lambda f: triton.testing.do_bench(f, warmup=50, rep=300, return_mode="median")
    for (b, h, n, d) in [(4, 16, 4096, 128), (1, 16, 16384, 64), (4, 16, 4096, 64)]:
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        scale = d ** -0.5
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            cudnn = bench(lambda: F.scaled_dot_product_attention(q, k, v))
        ours = bench(lambda: triton_forward(q, k, v, False, scale))
        row = {"shape": [b, h, n, d], "cudnn_ms": cudnn, "triton_ms": ours,
               "triton_err": (triton_forward(q, k, v, False, scale)[0].float() - ref).abs().max().item()}
        for bm, bn, w, ov in [(128, 64, 8, True), (128, 128, 8, True), (64, 64, 4, True), (128, 128, 8, False), (128, 64, 8, False)]:
            key = f"gluon_{bm}x{bn}w{w}" + ("" if ov else "_no_overlap")
            try:
                o, lse = gluon_forward(q, k, v, scale, bm, bn, w, ov)
                err = (o.float() - ref).abs().max().item()
                row[key] = {"ms": bench(lambda: gluon_forward(q, k, v, scale, bm, bn, w, ov)), "max_err": err}
            except Exception as e:
                row[key] = {"error": f"{type(e).__name__}: {str(e)[-600:]}"}
        print(json.dumps(row), flush=True)
        out.append(row)
    json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "gluon_probe.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
