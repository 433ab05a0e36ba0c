"""Scratch: gb_rot64{a,b}.py = the package's Hopper backward at head dim 64 (two 64-row parts per 128-row step)
with its step loop rotated: an iteration issues step t's dQ, then the first part of step t + 1's S^T (a: and dP^T),
and only then waits for dQ and hands it over; the rest of step t + 1 follows."""
import sys

BOTH = {"a": True, "b": False}
for tag, both in BOTH.items():
    src = open("gb_head.py").read()
    start = src.index("    mbarrier.wait(kv_bar, 0)\n    it = 0\n")
    end = src.index("    dk = warpgroup_mma_wait(num_outstanding=0, deps=(dk,))\n    dv = warpgroup_mma_wait(num_outstanding=0, deps=(dv,))")
    first = ("        st, dpt = _issue_scores(t + 1, 0, ring, k_mine, v_mine, zero_st, True)\n"
             "        dq = warpgroup_mma_wait(num_outstanding=2, deps=(dq,))\n"
             "        _hand_over_dq(dq, t, ds_free, q_empty, dq_empty, dq_full, dq_smem, softmax_scale, WARPGROUP)\n"
             if both else
             "        st, dpt = _issue_scores(t + 1, 0, ring, k_mine, v_mine, zero_st, False)\n"
             "        dq = warpgroup_mma_wait(num_outstanding=1, deps=(dq,))\n"
             "        _hand_over_dq(dq, t, ds_free, q_empty, dq_empty, dq_full, dq_smem, softmax_scale, WARPGROUP)\n"
             "        dpt = _issue_dp(t + 1, 0, ring, v_mine, zero_st)\n")
    body = '''    if CAUSAL:
        per_head = steps
        skip = steps
    else:
        per_head = q_tiles
        skip = steps
        if q_tiles < steps:
            skip = (steps - 1 - RATIO * n + steps) % steps
    total = n_heads * per_head
    ring = (q_smem, do_smem, ld_smem, q_ready, ds_smem, ds_free)
    PARTS: gl.constexpr = BLOCK_M // SUB_M
    mbarrier.wait(kv_bar, 0)
    s0 = _walk_step(0, per_head, skip)
    for h in gl.static_range(PARTS):
        st, dpt = _issue_scores(0, h, ring, k_mine, v_mine, zero_st, True)
        dv, dk = _ds_and_grads(st, dpt, 0, h, s0, n, ring, dv, dk, keys, key_ok, offs_col, a_layout, col_layout,
                               n_ctx, q_tiles, key_tiles, qk_scale_log2, CAUSAL, WARPGROUP, BLOCK_M)
    for t in range(total - 1):
        slot = t % STAGES
        mbarrier.arrive(ds_ready.index(slot))
        mbarrier.wait(ds_ready.index(slot), (t // STAGES) & 1)
        ds_dq = _part(ds_smem.index(slot), _dq_row(WARPGROUP, HEAD_DIM) // SUB_M, SUB_M, 1).permute((1, 0))
        dq = warpgroup_mma(ds_dq, k_dq, zero_dq, use_acc=False, is_async=True)
FIRST        s1 = _walk_step(t + 1, per_head, skip)
        dv, dk = _ds_and_grads(st, dpt, t + 1, 0, s1, n, ring, dv, dk, keys, key_ok, offs_col, a_layout, col_layout,
                               n_ctx, q_tiles, key_tiles, qk_scale_log2, CAUSAL, WARPGROUP, BLOCK_M)
        for h in gl.static_range(1, PARTS):
            st, dpt = _issue_scores(t + 1, h, ring, k_mine, v_mine, zero_st, True)
            dv, dk = _ds_and_grads(st, dpt, t + 1, h, s1, n, ring, dv, dk, keys, key_ok, offs_col, a_layout,
                                   col_layout, n_ctx, q_tiles, key_tiles, qk_scale_log2, CAUSAL, WARPGROUP, BLOCK_M)
    t = total - 1
    slot = t % STAGES
    mbarrier.arrive(ds_ready.index(slot))
    mbarrier.wait(ds_ready.index(slot), (t // STAGES) & 1)
    ds_dq = _part(ds_smem.index(slot), _dq_row(WARPGROUP, HEAD_DIM) // SUB_M, SUB_M, 1).permute((1, 0))
    dq = warpgroup_mma(ds_dq, k_dq, zero_dq, use_acc=False, is_async=True)
    dq = warpgroup_mma_wait(num_outstanding=0, deps=(dq,))
    _hand_over_dq(dq, t, ds_free, q_empty, dq_empty, dq_full, dq_smem, softmax_scale, WARPGROUP)
'''.replace("FIRST", first)
    src = src[:start] + body + src[end:]
    helpers = '''@gluon.jit
def _walk_step(t, per_head, skip):
    """The step (of :func:`_steps`) of the walk's ``t``-th visited query tile."""
    u = t % per_head
    return u + (u >= skip).to(gl.int32)


@gluon.jit
def _issue_scores(it, h: gl.constexpr, ring, k_mine, v_mine, zero_st, WITH_DP: gl.constexpr):
    """S^T (and dP^T) of part ``h`` of visited tile ``it``, issued once its Q and dO are in."""
    q_smem, do_smem, ld_smem, q_ready, ds_smem, ds_free = ring
    slot = it % STAGES
    if h == 0:
        mbarrier.wait(q_ready.index(slot), (it // STAGES) & 1)
    st = warpgroup_mma(k_mine, _part(q_smem.index(slot), h, SUB_M, 0).permute((1, 0)), zero_st, use_acc=False,
                       is_async=True)
    dpt = zero_st
    if WITH_DP:
        dpt = warpgroup_mma(v_mine, _part(do_smem.index(slot), h, SUB_M, 0).permute((1, 0)), zero_st,
                            use_acc=False, is_async=True)
    return st, dpt


@gluon.jit
def _issue_dp(it, h: gl.constexpr, ring, v_mine, zero_st):
    q_smem, do_smem, ld_smem, q_ready, ds_smem, ds_free = ring
    slot = it % STAGES
    return warpgroup_mma(v_mine, _part(do_smem.index(slot), h, SUB_M, 0).permute((1, 0)), zero_st, use_acc=False,
                         is_async=True)


@gluon.jit
def _ds_and_grads(st, dpt, it, h: gl.constexpr, s, n, ring, dv, dk, keys, key_ok, offs_col, a_layout: gl.constexpr,
                  col_layout: gl.constexpr, n_ctx, q_tiles, key_tiles, qk_scale_log2, CAUSAL: gl.constexpr,
                  WARPGROUP: gl.constexpr, BLOCK_M: gl.constexpr):
    """P^T and dS^T of part ``h`` of visited tile ``it`` (step ``s``), dS^T to shared memory, dV and dK issued."""
    q_smem, do_smem, ld_smem, q_ready, ds_smem, ds_free = ring
    RATIO: gl.constexpr = BLOCK_N // BLOCK_M
    KEYS: gl.constexpr = BLOCK_N // 2
    slot = it % STAGES
    j = _query_tile(n, s, key_tiles, CAUSAL, BLOCK_M)
    queries = j * BLOCK_M + h * SUB_M + offs_col
    lse2 = _lse2(_part(ld_smem.index(2 * slot), h, SUB_M, 0), queries, n_ctx, col_layout)
    delta = _part(ld_smem.index(2 * slot + 1), h, SUB_M, 0).load(col_layout)
    st = warpgroup_mma_wait(num_outstanding=1, deps=(st,))
    pt = gl.exp2(st * qk_scale_log2 - lse2[None, :])
    if CAUSAL:  # noqa: SIM102
        if s < RATIO:
            pt = gl.where(keys[:, None] <= queries[None, :], pt, 0.0)
    if (n + 1) * BLOCK_N > n_ctx:
        pt = gl.where(key_ok[:, None], pt, 0.0)
    pt_a = gl.convert_layout(pt.to(ds_smem.dtype), a_layout)
    dpt = warpgroup_mma_wait(num_outstanding=0, deps=(dpt,))
    dst = (pt * (dpt - delta[None, :])).to(ds_smem.dtype)
    if h == 0:
        mbarrier.wait(ds_free.index(slot), ((it // STAGES) & 1) ^ 1)
    ds_h = _part(ds_smem.index(slot).slice(WARPGROUP * KEYS, KEYS), h, SUB_M, 1)
    ds_h.store(dst)
    fence_async_shared()
    dv = warpgroup_mma(pt_a, _part(do_smem.index(slot), h, SUB_M, 0), dv, is_async=True)
    dk = warpgroup_mma(ds_h, _part(q_smem.index(slot), h, SUB_M, 0), dk, is_async=True)
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
    open(f"gb_rot64{tag}.py", "w").write(src)
