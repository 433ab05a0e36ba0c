"""FlashAttention-2 backward pass in Triton: two kernels and their launcher.

With ``P = softmax(scale * Q K^T)`` recomputed tile by tile from the saved row
logsumexp ``L`` (``P_ij = exp(scale * q_i . k_j - L_i)``), the gradients are
(FA2 paper, Algorithm 2, Dao 2023, arXiv:2307.08691)::

    dV = P^T dO
    dP = dO V^T
    dS = P * (dP - Delta),  Delta_i = rowsum(dO_i * O_i)
    dQ = scale * dS K
    dK = scale * dS^T Q

1. ``_preprocess_kernel`` computes ``Delta`` once per query row and resets the
   counters of the next kernel.
2. ``_backward_kernel``: one program per key/value tile keeps K, V, dK and dV
   on chip and walks the query tiles (and, with grouped-query attention, every
   query head that shares its k/v head). Each step does the five tile products
   above and adds the step's contribution ``dS K`` to that query tile's dQ,
   kept in an fp32 workspace.

Deterministic dQ: the contributions to one query tile are added in increasing
key-tile order. A counter per query tile says how many key tiles have added
theirs; a program waits until the count equals its key tile's index, adds, and
increments it. The first key tile writes the workspace without reading it, the
last one (the last key tile that sees the query tile) writes the final dQ in the
input dtype; so identical inputs give bitwise-identical gradients. Each program
walks its query tiles from the last down, so neighbouring key tiles reach the
same query tile at the same step and a wait is one read-modify-write of the
previous key tile. Programs take their work in the order they start (an atomic
ticket), key tile 0 of every (batch, head) first: a program only ever waits for
one that started before it, which is running or done, so the waits cannot
deadlock whatever order the GPU schedules programs in. With
``deterministic=False`` the contributions are added with floating-point atomic
adds in whatever order they arrive (and a third kernel converts the workspace),
as FlashAttention-2 and -3 do by default.

The causal split (unmasked tiles, masked diagonal tiles, skipped tiles) mirrors
the forward kernel.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashattn2._launch import KernelLauncher, TileChooser
from flashattn2._triton_common import (
    LOG2_E,
    LOG2_E_IN_KERNEL,
    bf16_ready,
    dot_mode,
    head_dim_block,
    load_tile,
    seq_len_bucket,
    tile_dot,
    within_int32_offsets,
)


@triton.jit
def _preprocess_kernel(
    O, DO, DELTA, COUNTERS, DQ_ACC,
    stride_ob, stride_oh, stride_on, stride_od,
    stride_gb, stride_gh, stride_gn, stride_gd,
    H, N_Q,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, DETERMINISTIC: tl.constexpr,
):
    """One program per query tile of one (batch, head).

    ``Delta[b, h, i] = sum_d dO[b, h, i, d] * O[b, h, i, d]`` in fp32 (DELTA
    contiguous ``(B, H, Nq)``); then, for the backward kernel, the tile's dQ
    counter set to 0 (deterministic; program (0, 0) also resets the ticket
    counter ``COUNTERS[0]``) or its rows of the dQ workspace zeroed (atomic adds).
    """
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_m[:, None] < N_Q) & (offs_d[None, :] < HEAD_DIM)
    o = tl.load(O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_on + offs_d[None, :] * stride_od,
                mask=mask, other=0.0)
    do = tl.load(DO + b * stride_gb + h * stride_gh + offs_m[:, None] * stride_gn + offs_d[None, :] * stride_gd,
                 mask=mask, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + pid_bh.to(tl.int64) * N_Q + offs_m, delta, mask=offs_m < N_Q)
    num_m = tl.num_programs(0)
    if DETERMINISTIC:
        tl.store(COUNTERS + 1 + pid_bh * num_m + pid_m, 0)
        if pid_m + pid_bh == 0:
            tl.store(COUNTERS, 0)
    else:
        acc_rows = pid_bh.to(tl.int64) * num_m * BLOCK_M + offs_m
        tl.store(DQ_ACC + acc_rows[:, None] * BLOCK_D + offs_d[None, :], tl.zeros([BLOCK_M, BLOCK_D], tl.float32))


@triton.jit
def _backward_tile(
    dk, dv, k, v,
    q_base, do_base, lse_base, delta_base, dq_base, acc_base, counter_base,
    stride_qn, stride_qd, stride_gn, stride_gd, stride_dqn, stride_dqd,
    start_m, pid_n, last_n, offs_n, offs_d, N_Q, KV_SHIFT, qk_scale_log2, softmax_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    MASKED: tl.constexpr, CAUSAL: tl.constexpr, DOT_MODE: tl.constexpr, DETERMINISTIC: tl.constexpr,
):
    """One query tile's step for a key tile: add to dK and dV, and this key tile's share of the query tile's dQ.

    Scores are transposed (keys x queries). ``last_n``: the last key tile that sees
    this query tile, the one that writes its final dQ.
    """
    offs_m = start_m + tl.arange(0, BLOCK_M)
    q = load_tile(q_base, offs_m, offs_d, stride_qn, stride_qd, N_Q, HEAD_DIM, BLOCK_D, MASKED)
    do = load_tile(do_base, offs_m, offs_d, stride_gn, stride_gd, N_Q, HEAD_DIM, BLOCK_D, MASKED)
    if MASKED:
        lse = tl.load(lse_base + offs_m, mask=offs_m < N_Q, other=0.0)
        delta = tl.load(delta_base + offs_m, mask=offs_m < N_Q, other=0.0)
    else:
        lse = tl.load(lse_base + offs_m)
        delta = tl.load(delta_base + offs_m)
    s_t = tile_dot(k, tl.trans(q), DOT_MODE) * qk_scale_log2
    p_t = tl.exp2(s_t - lse[None, :] * LOG2_E_IN_KERNEL)
    if MASKED:
        visible = offs_m[None, :] < N_Q
        if CAUSAL:
            visible = visible & (offs_n[:, None] <= offs_m[None, :] + KV_SHIFT)
        # tl.where, not a product: p_t is +inf for rows whose L is -inf (rows that see no key).
        p_t = tl.where(visible, p_t, 0.0)
    dv += tile_dot(bf16_ready(p_t, DOT_MODE).to(do.dtype), do, DOT_MODE)
    dp_t = tile_dot(v, tl.trans(do), DOT_MODE)
    ds_t = bf16_ready(p_t * (dp_t - delta[None, :]), DOT_MODE).to(q.dtype)
    dk += tile_dot(ds_t, q, DOT_MODE)
    dq = tile_dot(tl.trans(ds_t), k, DOT_MODE)  # (BLOCK_M, BLOCK_D), still to be multiplied by the scale

    # The workspace holds whole padded tiles: no masks.
    acc_ptrs = acc_base + offs_m[:, None] * BLOCK_D + offs_d[None, :]
    if DETERMINISTIC:
        counter = counter_base + start_m // BLOCK_M
        while tl.atomic_add(counter, 0, sem="acquire") != pid_n:  # key tiles 0 .. pid_n - 1 have added theirs
            pass
        if pid_n > 0:
            dq += tl.load(acc_ptrs, cache_modifier=".cg")  # L2, where the previous key tile's stores are
        if pid_n == last_n:
            dq_ptrs = dq_base + offs_m[:, None] * stride_dqn + offs_d[None, :] * stride_dqd
            dq_mask = (offs_m[:, None] < N_Q) & (offs_d[None, :] < HEAD_DIM)
            tl.store(dq_ptrs, bf16_ready(dq * softmax_scale, DOT_MODE).to(q.dtype), mask=dq_mask)
        else:
            tl.store(acc_ptrs, dq, cache_modifier=".cg")
        tl.debug_barrier()  # every thread's stores, before the release below
        tl.atomic_xchg(counter, pid_n + 1, sem="release")
    else:
        tl.atomic_add(acc_ptrs, dq, sem="relaxed")
    return dk, dv


@triton.jit
def _backward_kernel(
    Q, K, V, DO, LSE, DELTA, DQ, DK, DV, DQ_ACC, COUNTERS,
    stride_qb, stride_qh, stride_qn, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_gb, stride_gh, stride_gn, stride_gd,
    stride_dqb, stride_dqh, stride_dqn, stride_dqd,
    stride_dkb, stride_dkh, stride_dkn, stride_dkd,
    stride_dvb, stride_dvh, stride_dvn, stride_dvd,
    qk_scale_log2, softmax_scale,
    H, KV_GROUP, N_Q, N_K,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr, DOT_MODE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, DETERMINISTIC: tl.constexpr,
):
    """One program: dK, dV of one key tile of one (batch, k/v head), and its share of dQ.

    LSE and DELTA are contiguous ``(B, H, Nq)``; DQ_ACC is fp32 ``(B * H, num_m *
    BLOCK_M, BLOCK_D)``; COUNTERS is int32: the ticket counter, then one dQ
    counter per query tile of each (batch, head).
    """
    num_n = tl.cdiv(N_K, BLOCK_N)
    num_m = tl.cdiv(N_Q, BLOCK_M)
    bh_kv_count = tl.num_programs(0) // num_n
    if DETERMINISTIC:
        ticket = tl.atomic_add(COUNTERS, 1)  # the order programs start in
    else:
        ticket = tl.program_id(0)
    # Key tile 0 of every (batch, k/v head) first: in causal attention it sees the most query tiles.
    pid_n = ticket // bh_kv_count
    pid_bhk = ticket % bh_kv_count
    h_kv_count = H // KV_GROUP
    b = (pid_bhk // h_kv_count).to(tl.int64)
    h_kv = (pid_bhk % h_kv_count).to(tl.int64)
    n0 = pid_n * BLOCK_N
    kv_shift = N_K - N_Q

    offs_n = n0 + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    k = load_tile(K + b * stride_kb + h_kv * stride_kh, offs_n, offs_d, stride_kn, stride_kd, N_K, HEAD_DIM,
                  BLOCK_D, True)
    v = load_tile(V + b * stride_vb + h_kv * stride_vh, offs_n, offs_d, stride_vn, stride_vd, N_K, HEAD_DIM,
                  BLOCK_D, True)
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)

    # Query tiles in three segments: [first_m, diag_end) crosses the causal
    # diagonal (masked), [diag_end, full_end) is complete and fully visible
    # (unmasked), [tail_start, N_Q) is the ragged last tile (masked). They are
    # walked from the last query tile down.
    if CAUSAL:
        # Queries i < n0 - kv_shift see none of this key tile; i >= n0 + BLOCK_N - 1 - kv_shift see all of it.
        first_m = (tl.maximum(n0 - kv_shift, 0) // BLOCK_M) * BLOCK_M
        diag_end = tl.cdiv(tl.maximum(n0 + BLOCK_N - 1 - kv_shift, 0), BLOCK_M) * BLOCK_M
    else:
        first_m = 0
        diag_end = 0
    full_end = (N_Q // BLOCK_M) * BLOCK_M
    masked_end = tl.minimum(diag_end, num_m * BLOCK_M)
    tail_start = tl.maximum(diag_end, full_end)

    for start_m in range(tail_start, N_Q, BLOCK_M):  # at most one tile
        # The last key tile that sees query tile start_m (key tiles seen by a query tile are a prefix).
        last_n = num_n - 1
        if CAUSAL:
            last_n = tl.minimum(last_n, (start_m + BLOCK_M - 1 + kv_shift) // BLOCK_N)
        for g in range(KV_GROUP):  # every query head that shares this k/v head, in a fixed order
            h = h_kv * KV_GROUP + g
            row_offset = (b * H + h) * N_Q
            dk, dv = _backward_tile(
                dk, dv, k, v,
                Q + b * stride_qb + h * stride_qh, DO + b * stride_gb + h * stride_gh,
                LSE + row_offset, DELTA + row_offset, DQ + b * stride_dqb + h * stride_dqh,
                DQ_ACC + (b * H + h) * num_m * BLOCK_M * BLOCK_D, COUNTERS + 1 + (b * H + h) * num_m,
                stride_qn, stride_qd, stride_gn, stride_gd, stride_dqn, stride_dqd,
                start_m, pid_n, last_n, offs_n, offs_d, N_Q, kv_shift, qk_scale_log2, softmax_scale,
                HEAD_DIM, BLOCK_M, BLOCK_N, BLOCK_D, True, CAUSAL, DOT_MODE, DETERMINISTIC,
            )
    for step in range(0, (full_end - diag_end) // BLOCK_M):
        start_m = full_end - (step + 1) * BLOCK_M
        last_n = num_n - 1
        if CAUSAL:
            last_n = tl.minimum(last_n, (start_m + BLOCK_M - 1 + kv_shift) // BLOCK_N)
        for g in range(KV_GROUP):
            h = h_kv * KV_GROUP + g
            row_offset = (b * H + h) * N_Q
            dk, dv = _backward_tile(
                dk, dv, k, v,
                Q + b * stride_qb + h * stride_qh, DO + b * stride_gb + h * stride_gh,
                LSE + row_offset, DELTA + row_offset, DQ + b * stride_dqb + h * stride_dqh,
                DQ_ACC + (b * H + h) * num_m * BLOCK_M * BLOCK_D, COUNTERS + 1 + (b * H + h) * num_m,
                stride_qn, stride_qd, stride_gn, stride_gd, stride_dqn, stride_dqd,
                start_m, pid_n, last_n, offs_n, offs_d, N_Q, kv_shift, qk_scale_log2, softmax_scale,
                HEAD_DIM, BLOCK_M, BLOCK_N, BLOCK_D, False, CAUSAL, DOT_MODE, DETERMINISTIC,
            )
    for step in range(0, (masked_end - first_m) // BLOCK_M):
        start_m = masked_end - (step + 1) * BLOCK_M
        last_n = num_n - 1
        if CAUSAL:
            last_n = tl.minimum(last_n, (start_m + BLOCK_M - 1 + kv_shift) // BLOCK_N)
        for g in range(KV_GROUP):
            h = h_kv * KV_GROUP + g
            row_offset = (b * H + h) * N_Q
            dk, dv = _backward_tile(
                dk, dv, k, v,
                Q + b * stride_qb + h * stride_qh, DO + b * stride_gb + h * stride_gh,
                LSE + row_offset, DELTA + row_offset, DQ + b * stride_dqb + h * stride_dqh,
                DQ_ACC + (b * H + h) * num_m * BLOCK_M * BLOCK_D, COUNTERS + 1 + (b * H + h) * num_m,
                stride_qn, stride_qd, stride_gn, stride_gd, stride_dqn, stride_dqd,
                start_m, pid_n, last_n, offs_n, offs_d, N_Q, kv_shift, qk_scale_log2, softmax_scale,
                HEAD_DIM, BLOCK_M, BLOCK_N, BLOCK_D, True, CAUSAL, DOT_MODE, DETERMINISTIC,
            )

    kv_mask = (offs_n[:, None] < N_K) & (offs_d[None, :] < HEAD_DIM)
    dk = dk * softmax_scale
    tl.store(DK + b * stride_dkb + h_kv * stride_dkh + offs_n[:, None] * stride_dkn + offs_d[None, :] * stride_dkd,
             bf16_ready(dk, DOT_MODE).to(DK.dtype.element_ty), mask=kv_mask)
    tl.store(DV + b * stride_dvb + h_kv * stride_dvh + offs_n[:, None] * stride_dvn + offs_d[None, :] * stride_dvd,
             bf16_ready(dv, DOT_MODE).to(DV.dtype.element_ty), mask=kv_mask)


@triton.jit
def _dq_from_workspace_kernel(
    DQ_ACC, DQ,
    stride_dqb, stride_dqh, stride_dqn, stride_dqd,
    softmax_scale, H, N_Q,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, DOT_MODE: tl.constexpr,
):
    """``deterministic=False``: dQ = scale * workspace, in the output dtype (one program per query tile)."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    acc_rows = pid_bh.to(tl.int64) * tl.num_programs(0) * BLOCK_M + offs_m
    dq = tl.load(DQ_ACC + acc_rows[:, None] * BLOCK_D + offs_d[None, :]) * softmax_scale
    tl.store(DQ + b * stride_dqb + h * stride_dqh + offs_m[:, None] * stride_dqn + offs_d[None, :] * stride_dqd,
             bf16_ready(dq, DOT_MODE).to(DQ.dtype.element_ty),
             mask=(offs_m[:, None] < N_Q) & (offs_d[None, :] < HEAD_DIM))


launch_preprocess = KernelLauncher(_preprocess_kernel)
launch_backward = KernelLauncher(_backward_kernel)
launch_dq_from_workspace = KernelLauncher(_dq_from_workspace_kernel)
backward_tiles = TileChooser()


def triton_backward(
    grad_out: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    causal: bool,
    softmax_scale: float,
    deterministic: bool = True,
    one_allocation: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Attention backward with the Triton kernels.

    Arguments:
        grad_out, out: ``(B, H, Nq, D)``, any strides (see ``triton_forward``), q's dtype.
        q: ``(B, H, Nq, D)``; k, v: ``(B, Hkv, Nk, D)``; the forward's inputs.
        lse: ``(B, H, Nq)`` float32, the forward's logsumexp (natural log).
        causal, softmax_scale: as in the forward.
        deterministic: add the dQ contributions in a fixed order (bitwise
            reproducible) rather than with floating-point atomic adds.
        one_allocation: allocate dq, dk and dv as views of one buffer (one
            allocation instead of three); ``False`` for callers whose outputs may
            not alias each other (``torch.library`` operators).

    Returns:
        ``(dq, dk, dv)``, contiguous, with the shapes and dtype of q, k and v.
    """
    batch, heads, n_q, head_dim = q.shape
    kv_heads, n_k = k.shape[1], k.shape[2]
    size_q, size_kv = q.numel(), k.numel()
    if one_allocation:
        grads = torch.empty(size_q + 2 * size_kv, dtype=q.dtype, device=q.device)
        dq = grads[:size_q].view(q.shape)
        dk = grads[size_q : size_q + size_kv].view(k.shape)
        dv = grads[size_q + size_kv :].view(k.shape)
    else:
        dq, dk, dv = (torch.empty(x.shape, dtype=x.dtype, device=x.device) for x in (q, k, v))
    if size_q == 0 or size_kv == 0:
        # No query or no key: O does not depend on the inputs, every gradient is zero.
        return dq.zero_(), dk.zero_(), dv.zero_()
    if causal and n_q > n_k:
        dq.zero_()  # the first n_q - n_k queries see no key: no key tile writes their dQ

    q, k, v = within_int32_offsets(q, "q"), within_int32_offsets(k, "k"), within_int32_offsets(v, "v")
    out, grad_out = within_int32_offsets(out, "out"), within_int32_offsets(grad_out, "grad_out")
    lse = lse.contiguous()
    block_d = head_dim_block(head_dim)
    mode = dot_mode(q.dtype)

    def launch(tile):
        num_m, num_n = triton.cdiv(n_q, tile.block_m), triton.cdiv(n_k, tile.block_n)
        # One fp32 allocation: the dQ workspace (whole padded tiles), Delta, and the
        # int32 counters (the ticket, then one per query tile).
        acc_size = batch * heads * num_m * tile.block_m * block_d
        delta_size = batch * heads * n_q
        workspace = torch.empty(acc_size + delta_size + 1 + batch * heads * num_m, dtype=torch.float32,
                                device=q.device)
        dq_acc = workspace[:acc_size]
        delta = workspace[acc_size : acc_size + delta_size]
        counters = workspace[acc_size + delta_size :].view(torch.int32)
        launch_preprocess(
            (num_m, batch * heads, 1), out, grad_out, delta, counters, dq_acc,
            *out.stride(), *grad_out.stride(), heads, n_q, tile=tile,
            HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_M=tile.block_m, DETERMINISTIC=deterministic,
        )
        launch_backward(
            (num_n * batch * kv_heads, 1, 1),
            q, k, v, grad_out, lse, delta, dq, dk, dv, dq_acc, counters,
            *q.stride(), *k.stride(), *v.stride(), *grad_out.stride(), *dq.stride(), *dk.stride(), *dv.stride(),
            softmax_scale * LOG2_E, softmax_scale, heads, heads // kv_heads, n_q, n_k, tile=tile,
            HEAD_DIM=head_dim, BLOCK_D=block_d, CAUSAL=causal, DOT_MODE=mode,
            BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, DETERMINISTIC=deterministic,
        )
        if not deterministic:
            launch_dq_from_workspace(
                (num_m, batch * heads, 1), dq_acc, dq, *dq.stride(), softmax_scale, heads, n_q, tile=tile,
                HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_M=tile.block_m, DOT_MODE=mode,
            )

    key = (head_dim, q.dtype, causal, q.device, seq_len_bucket(max(n_q, n_k)), deterministic)
    launch(backward_tiles.choose(key, launch, "backward", head_dim, q.dtype, causal, q.device))
    return dq, dk, dv
