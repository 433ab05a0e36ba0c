"""Scratch: gb_rot.py = the package's Hopper backward at head dim 128 (one 64-row part per step) with its step loop
rotated: an iteration issues step t's dQ, then step t + 1's S^T and dP^T, and only then waits for dQ and hands it
over; step t + 1's softmax and dS follow. Each product read in the loop is issued in the same iteration."""
src = open("gb_head.py").read()
start = src.index("    mbarrier.wait(kv_bar, 0)\n    it = 0\n")
end = src.index("    dk = warpgroup_mma_wait(num_outstanding=0, deps=(dk,))\n    dv = warpgroup_mma_wait(num_outstanding=0, deps=(dv,))")
body = '''    # Every step of the walk, query heads one after another, skipping the query tile past the end that a
    # non-causal walk of 128-key tiles meets when the length is not a multiple of 128.
    if CAUSAL:
        per_head = steps
        skip = steps
    else:
        per_head = q_tiles
        skip = steps
        if q_tiles < steps:
            skip = (steps - 1 - RATIO * n + steps) % steps
    total = n_heads * per_head
    ring = (q_smem, do_smem, ld_smem, q_ready, ds_smem, ds_free)
    mbarrier.wait(kv_bar, 0)
    st, dpt = _issue_scores(0, ring, k_mine, v_mine, zero_st)
    dv, dk = _ds_and_grads(st, dpt, 0, _walk_step(0, per_head, skip), n, ring, dv, dk, keys, key_ok, offs_col,
                           a_layout, col_layout, n_ctx, q_tiles, key_tiles, qk_scale_log2, CAUSAL, WARPGROUP,
                           BLOCK_M)
    for t in range(total - 1):
        slot = t % STAGES
        mbarrier.arrive(ds_ready.index(slot))
        mbarrier.wait(ds_ready.index(slot), (t // STAGES) & 1)
        dq = warpgroup_mma(ds_smem.index(slot).permute((1, 0)), k_dq, zero_dq, use_acc=False, is_async=True)
        st, dpt = _issue_scores(t + 1, ring, k_mine, v_mine, zero_st)
        dq = warpgroup_mma_wait(num_outstanding=2, deps=(dq,))  # S^T and dP^T of the next step still run
        _hand_over_dq(dq, t, ds_free, q_empty, dq_empty, dq_full, dq_smem, softmax_scale, WARPGROUP)
        dv, dk = _ds_and_grads(st, dpt, t + 1, _walk_step(t + 1, per_head, skip), n, ring, dv, dk, keys, key_ok,
                               offs_col, a_layout, col_layout, n_ctx, q_tiles, key_tiles, qk_scale_log2, CAUSAL,
                               WARPGROUP, BLOCK_M)
    t = total - 1
    slot = t % STAGES
    mbarrier.arrive(ds_ready.index(slot))
    mbarrier.wait(ds_ready.index(slot), (t // STAGES) & 1)
    dq = warpgroup_mma(ds_smem.index(slot).permute((1, 0)), k_dq, zero_dq, use_acc=False, is_async=True)
    dq = warpgroup_mma_wait(num_outstanding=0, deps=(dq,))
    _hand_over_dq(dq, t, ds_free, q_empty, dq_empty, dq_full, dq_smem, softmax_scale, WARPGROUP)
'''
src = src[:start] + body + src[end:]
helpers = '''@gluon.jit
def _walk_step(t, per_head, skip):
    """The step (of :func:`_steps`) of the walk's ``t``-th visited query tile."""
    u = t % per_head
    return u + (u >= skip).to(gl.int32)


@gluon.jit
def _issue_scores(it, ring, k_mine, v_mine, zero_st):
    """S^T and dP^T of visited tile ``it``, issued once its Q and dO are in."""
    q_smem, do_smem, ld_smem, q_ready, ds_smem, ds_free = ring
    slot = it % STAGES
    mbarrier.wait(q_ready.index(slot), (it // STAGES) & 1)
    st = warpgroup_mma(k_mine, q_smem.index(slot).permute((1, 0)), zero_st, use_acc=False, is_async=True)
    dpt = warpgroup_mma(v_mine, do_smem.index(slot).permute((1, 0)), zero_st, use_acc=False, is_async=True)
    return st, dpt


@gluon.jit
def _ds_and_grads(st, dpt, it, s, n, ring, dv, dk, keys, key_ok, offs_col, a_layout: gl.constexpr,
                  col_layout: gl.constexpr, n_ctx, q_tiles, key_tiles, qk_scale_log2, CAUSAL: gl.constexpr,
                  WARPGROUP: gl.constexpr, BLOCK_M: gl.constexpr):
    """P^T and dS^T of visited tile ``it`` (step ``s``), dS^T to shared memory, dV and dK issued."""
    q_smem, do_smem, ld_smem, q_ready, ds_smem, ds_free = ring
    RATIO: gl.constexpr = BLOCK_N // BLOCK_M
    KEYS: gl.constexpr = BLOCK_N // 2
    slot = it % STAGES
    j = _query_tile(n, s, key_tiles, CAUSAL, BLOCK_M)
    queries = j * BLOCK_M + offs_col
    st = warpgroup_mma_wait(num_outstanding=1, deps=(st,))
    lse2 = _lse2(ld_smem.index(2 * slot), queries, n_ctx, col_layout)
    pt = gl.exp2(st * qk_scale_log2 - lse2[None, :])
    if CAUSAL:  # noqa: SIM102
        if s < RATIO:
            pt = gl.where(keys[:, None] <= queries[None, :], pt, 0.0)
    if (n + 1) * BLOCK_N > n_ctx:
        pt = gl.where(key_ok[:, None], pt, 0.0)
    pt_a = gl.convert_layout(pt.to(ds_smem.dtype), a_layout)
    dpt = warpgroup_mma_wait(num_outstanding=0, deps=(dpt,))
    delta = ld_smem.index(2 * slot + 1).load(col_layout)
    dst = (pt * (dpt - delta[None, :])).to(ds_smem.dtype)
    mbarrier.wait(ds_free.index(slot), ((it // STAGES) & 1) ^ 1)
    ds_h = ds_smem.index(slot).slice(WARPGROUP * KEYS, KEYS)
    ds_h.store(dst)
    fence_async_shared()
    dv = warpgroup_mma(pt_a, do_smem.index(slot), dv, is_async=True)
    dk = warpgroup_mma(ds_h, q_smem.index(slot), dk, is_async=True)
    return dv, dk


@gluon.jit
def _hand_over_dq(dq, it, ds_free, q_empty, dq_empty, dq_full, dq_smem, softmax_scale, WARPGROUP: gl.constexpr):
    """Visited tile ``it``'s finished dQ piece to the writers; its dS and Q/dO slots are free."""
    slot = it % STAGES
    mbarrier.arrive(ds_free.index(slot))
    mbarrier.arrive(q_empty.index(slot))
    buf = it % 2
    mbarrier.wait(dq_empty.index(buf), ((it // 2) & 1) ^ 1)
    dq_smem.index(2 * buf + WARPGROUP).store(dq * softmax_scale)
    mbarrier.arrive(dq_full.index(buf))


@gluon.jit
def _consumer('''
src = src.replace("@gluon.jit\ndef _consumer(", helpers, 1)
open("gb_rot.py", "w").write(src)
