"""Scratch: gb_ov.py = the package's Hopper backward whose consumers (at head dim 128, one 64-row part per step)
wait for a step's dQ product only after issuing the next step's S^T and dP^T, then hand the dQ piece over."""
src = open("gb_head.py").read()
start = src.index("    mbarrier.wait(kv_bar, 0)\n    it = 0\n")
end = src.index("    dk = warpgroup_mma_wait(num_outstanding=0, deps=(dk,))\n    dv = warpgroup_mma_wait(num_outstanding=0, deps=(dv,))")
body = '''    mbarrier.wait(kv_bar, 0)
    it = 0
    pending = 0  # 1 when the previous step's dQ product is in flight
    dq = warpgroup_mma_init(zero_dq)
    for _head in range(n_heads):  # the query heads this program walks
        for s in range(steps):
            j = _query_tile(n, s, key_tiles, CAUSAL, BLOCK_M)
            if j < q_tiles:
                slot = it % STAGES
                mbarrier.wait(q_ready.index(slot), (it // STAGES) & 1)
                q_h = q_smem.index(slot)
                do_h = do_smem.index(slot)
                queries = j * BLOCK_M + offs_col
                st = warpgroup_mma(k_mine, q_h.permute((1, 0)), zero_st, use_acc=False, is_async=True)
                dpt = warpgroup_mma(v_mine, do_h.permute((1, 0)), zero_st, use_acc=False, is_async=True)
                # The previous step's dQ (and dV, dK) were issued before these two.
                dq = warpgroup_mma_wait(num_outstanding=2, deps=(dq,))
                if pending:
                    _hand_over_dq(dq, it - 1, ds_free, q_empty, dq_empty, dq_full, dq_smem, softmax_scale, WARPGROUP)
                st = warpgroup_mma_wait(num_outstanding=1, deps=(st,))
                lse2 = _lse2(ld_smem.index(2 * slot), queries, n_ctx, col_layout)
                pt = gl.exp2(st * qk_scale_log2 - lse2[None, :])
                if CAUSAL:  # noqa: SIM102 (a branch at compile time around one at run time)
                    if s < RATIO:  # the diagonal's query tiles
                        pt = gl.where(keys[:, None] <= queries[None, :], pt, 0.0)
                if (n + 1) * BLOCK_N > n_ctx:  # the ragged last key tile
                    pt = gl.where(key_ok[:, None], pt, 0.0)
                pt_a = gl.convert_layout(pt.to(ds_smem.dtype), a_layout)
                dpt = warpgroup_mma_wait(num_outstanding=0, deps=(dpt,))
                delta = ld_smem.index(2 * slot + 1).load(col_layout)
                dst = (pt * (dpt - delta[None, :])).to(ds_smem.dtype)
                mbarrier.wait(ds_free.index(slot), ((it // STAGES) & 1) ^ 1)
                ds_h = ds_smem.index(slot).slice(WARPGROUP * KEYS, KEYS)
                ds_h.store(dst)
                fence_async_shared()
                dv = warpgroup_mma(pt_a, do_h, dv, is_async=True)
                dk = warpgroup_mma(ds_h, q_h, dk, is_async=True)
                mbarrier.arrive(ds_ready.index(slot))
                mbarrier.wait(ds_ready.index(slot), (it // STAGES) & 1)
                ds_dq = ds_smem.index(slot).permute((1, 0))
                dq = warpgroup_mma(ds_dq, k_dq, zero_dq, use_acc=False, is_async=True)
                pending = 1
                it += 1
    dq = warpgroup_mma_wait(num_outstanding=0, deps=(dq,))
    if pending:
        _hand_over_dq(dq, it - 1, ds_free, q_empty, dq_empty, dq_full, dq_smem, softmax_scale, WARPGROUP)
'''
src = src[:start] + body + src[end:]
helper = '''@gluon.jit
def _hand_over_dq(dq, it, ds_free, q_empty, dq_empty, dq_full, dq_smem, softmax_scale, WARPGROUP: gl.constexpr):
    """Step ``it``'s finished dQ piece to the writers; its dS and Q/dO slots are free."""
    slot = it % STAGES
    mbarrier.arrive(ds_free.index(slot))
    mbarrier.arrive(q_empty.index(slot))
    buf = it % 2
    mbarrier.wait(dq_empty.index(buf), ((it // 2) & 1) ^ 1)
    dq_smem.index(2 * buf + WARPGROUP).store(dq * softmax_scale)
    mbarrier.arrive(dq_full.index(buf))


@gluon.jit
def _consumer('''
src = src.replace("@gluon.jit\ndef _consumer(", helper, 1)
open("gb_ov.py", "w").write(src)
