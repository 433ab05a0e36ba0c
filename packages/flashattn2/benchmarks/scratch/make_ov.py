"""Scratch: gf_ov{STAGES}.py = the package's Hopper forward with FlashAttention-3's intra-warpgroup order (the next
tile's S issued before this tile's P V, its softmax while P V runs) and K and V slots released separately (K once
S is in, V once P V is done), so that the loader can refill K a step ahead."""
import sys

stages = int(sys.argv[1])
src = open("gf_head.py").read()


def sub(old, new, count=1):
    global src
    assert src.count(old) == count, (src.count(old), old)
    src = src.replace(old, new)


sub("STAGES = gl.constexpr(2)", f"STAGES = gl.constexpr({stages})")
# barriers: kv_empty -> k_empty, v_empty
sub("    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())\n",
    "    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())\n"
    "    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())\n")
sub("        mbarrier.init(kv_empty.index(i), count=2)  # both consumers\n",
    "        mbarrier.init(k_empty.index(i), count=2)  # both consumers\n        mbarrier.init(v_empty.index(i), count=2)\n")
import re
src = re.sub(r"^( *)kv_empty,\n", r"\1k_empty,\n\1v_empty,\n", src, flags=re.M)
assert "kv_empty" not in src.replace("kv_empty.index", ""), "left"
sub("""        mbarrier.wait(kv_empty.index(slot), ((j // STAGES) & 1) ^ 1)
        mbarrier.expect(k_ready.index(slot), BLOCK_N * HEAD_DIM * 2)""",
    """        mbarrier.wait(k_empty.index(slot), ((j // STAGES) & 1) ^ 1)
        mbarrier.expect(k_ready.index(slot), BLOCK_N * HEAD_DIM * 2)""")
sub("""        mbarrier.expect(v_ready.index(slot), BLOCK_N * HEAD_DIM * 2)""",
    """        mbarrier.wait(v_empty.index(slot), ((j // STAGES) & 1) ^ 1)
        mbarrier.expect(v_ready.index(slot), BLOCK_N * HEAD_DIM * 2)""")
# consumer loop
start = src.index("    mbarrier.wait(q_bar, 0)\n    for j in range(")
end = src.index("    if MMA_ROW_SUMS:\n        acc, l_i = warpgroup_mma_wait(num_outstanding=0, deps=(acc, l_i))\n        l_i = gl.convert_layout(gl.max(l_i, 1)")
loop = '''    mbarrier.wait(q_bar, 0)
    n_kv = _key_tiles(m_tile, n_ctx, CAUSAL, BLOCK_N)
    mbarrier.wait(k_ready.index(0), 0)
    s = warpgroup_mma(q, k_smem.index(0).permute((1, 0)), zero_s, use_acc=False, is_async=True)
    s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
    mbarrier.arrive(k_empty.index(0))
    p, alpha, m_i = _softmax(s, 0, m_i, rows, offs_n, masked_from, n_ctx, qk_scale_log2, CAUSAL, NEGATIVE_SCALE,
                             BLOCK_N)
    if not MMA_ROW_SUMS:
        l_i = l_i * alpha + gl.sum(p, 1)
    p_op = gl.convert_layout(p.to(dtype), p_layout)
    for j in range(n_kv - 1):
        slot = j % STAGES
        nxt = (j + 1) % STAGES
        # The next tile's S first, then this tile's P V; the next softmax runs while P V does.
        mbarrier.wait(k_ready.index(nxt), ((j + 1) // STAGES) & 1)
        s = warpgroup_mma(q, k_smem.index(nxt).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        acc = acc * gl.convert_layout(alpha, o_row_layout)[:, None]
        if MMA_ROW_SUMS:
            l_i = l_i * gl.convert_layout(alpha, gl.SliceLayout(1, sums_layout))[:, None]
            p_sums = gl.convert_layout(p_op, p_sums_layout)
            l_i = warpgroup_mma(p_sums, ones_smem.permute((1, 0)), l_i, is_async=True)
        mbarrier.wait(v_ready.index(slot), (j // STAGES) & 1)
        acc = warpgroup_mma(p_op, v_smem.index(slot), acc, is_async=True)
        if MMA_ROW_SUMS:
            s = warpgroup_mma_wait(num_outstanding=2, deps=(s,))
        else:
            s = warpgroup_mma_wait(num_outstanding=1, deps=(s,))
        mbarrier.arrive(k_empty.index(nxt))
        p, alpha, m_i = _softmax(s, j + 1, m_i, rows, offs_n, masked_from, n_ctx, qk_scale_log2, CAUSAL,
                                 NEGATIVE_SCALE, BLOCK_N)
        if not MMA_ROW_SUMS:
            l_i = l_i * alpha + gl.sum(p, 1)
        p_next = gl.convert_layout(p.to(dtype), p_layout)
        if MMA_ROW_SUMS:
            acc, l_i, p_op, p_sums = warpgroup_mma_wait(num_outstanding=0, deps=(acc, l_i, p_op, p_sums))
        else:
            acc, p_op = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p_op))
        mbarrier.arrive(v_empty.index(slot))
        p_op = p_next
    slot = (n_kv - 1) % STAGES
    acc = acc * gl.convert_layout(alpha, o_row_layout)[:, None]
    if MMA_ROW_SUMS:
        l_i = l_i * gl.convert_layout(alpha, gl.SliceLayout(1, sums_layout))[:, None]
        l_i = warpgroup_mma(gl.convert_layout(p_op, p_sums_layout), ones_smem.permute((1, 0)), l_i, is_async=True)
    mbarrier.wait(v_ready.index(slot), ((n_kv - 1) // STAGES) & 1)
    acc = warpgroup_mma(p_op, v_smem.index(slot), acc, is_async=True)
'''
src = src[:start] + loop + src[end:]
sub("        l_i = warpgroup_mma_init(gl.zeros([BLOCK_M, ONES_WIDTH], gl.float32, sums_layout))",
    "        l_i = gl.zeros([BLOCK_M, ONES_WIDTH], gl.float32, sums_layout)")
sub("    acc = warpgroup_mma_init(gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout))",
    "    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)")
softmax = '''
@gluon.jit
def _softmax(s, j, m_i, rows, offs_n, masked_from, n_ctx, qk_scale_log2, CAUSAL: gl.constexpr,
             NEGATIVE_SCALE: gl.constexpr, BLOCK_N: gl.constexpr):
    """Key tile j's raw scores s: P (unnormalized, fp32), alpha = exp2(m_old - m_new) and m_new."""
    if j >= masked_from:
        keys = j * BLOCK_N + offs_n
        visible = (keys < n_ctx)[None, :]
        if CAUSAL:
            visible = visible & (keys[None, :] <= rows[:, None])
        s2 = gl.where(visible, s * qk_scale_log2, float("-inf"))
        m_new = gl.maximum(m_i, gl.max(s2, 1))
        p = gl.exp2(s2 - m_new[:, None])
    else:
        raw_max = gl.min(s, 1) if NEGATIVE_SCALE else gl.max(s, 1)
        m_new = gl.maximum(m_i, raw_max * qk_scale_log2)
        p = gl.exp2(s * qk_scale_log2 - m_new[:, None])
    return p, gl.exp2(m_i - m_new), m_new

'''
sub("\n\n@gluon.jit\ndef _consumer(", "\n" + softmax + "\n@gluon.jit\ndef _consumer(")
open(f"gf_ov{stages}.py", "w").write(src)
