"""FlashAttention-2 backward pass in Triton: three kernels and their launcher.

With ``P = softmax(scale * Q K^T)`` recomputed tile by tile from the saved row
logsumexp ``L`` (``P_ij = exp(scale * q_i . k_j - L_i)``), the gradients are
(FA2 paper, Algorithm 2, Dao 2023, arXiv:2307.08691)::

    dV = P^T dO
    dP = dO V^T
    dS = P * (dP - Delta),  Delta_i = rowsum(dO_i * O_i)
    dQ = scale * dS K
    dK = scale * dS^T Q

1. ``_delta_kernel`` computes ``Delta`` once per query row.
2. ``_dkdv_kernel``: one program per key/value tile, looping over the query
   tiles (and, with grouped-query attention, over every query head that shares
   this k/v head), accumulating dK and dV in registers.
3. ``_dq_kernel``: one program per query tile, looping over the key tiles.

Each output element is written by exactly one program and summed in a fixed
order: there are no atomics, so identical inputs give bitwise-identical
gradients. The causal split (unmasked tiles, masked diagonal tiles, skipped
tiles) mirrors the forward kernel.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashattn2._triton_common import (
    KERNELS_INTERPRETED,
    LOG2_E,
    LOG2_E_IN_KERNEL,
    TunedLaunch,
    bf16_ready,
    configs_for,
    dot_mode,
    head_dim_block,
    key_ranges,
    load_tile,
    prune_to_fit,
    seq_len_bucket,
    tile_dot,
    visible_keys,
    within_int32_offsets,
)

# Tile shapes tried on a GPU. dK/dV programs keep a key tile resident and stream
# query tiles past it, dQ programs the reverse (the Triton fused-attention
# tutorial's backward splits them 32x128 and 128x32). The first of each list is
# the default without autotuning: the fastest at the headline shape (B=1, H=16,
# N=16384, D=64, bf16, causal) on an H100 on 2026-11-22, measured one kernel at a
# time by benchmarks/tiles.py (BENCHMARKS.md has the table).
_DKDV_GPU_TILES = [  # (BLOCK_M, BLOCK_N, num_warps, num_stages)
    (64, 64, 4, 2),
    (32, 128, 4, 3),
    (64, 128, 8, 3),
    (64, 128, 8, 2),
    (32, 128, 8, 2),
    (64, 64, 4, 3),
    (64, 64, 4, 4),
    (32, 64, 4, 3),
    (16, 64, 4, 2),
    (16, 32, 4, 1),  # the smallest: wide fp32 heads (D = 256)
]
_DQ_GPU_TILES = [  # (BLOCK_M, BLOCK_N, num_warps, num_stages)
    (128, 64, 8, 3),
    (128, 32, 4, 3),
    (128, 64, 8, 2),
    (128, 32, 8, 2),
    (64, 64, 4, 3),
    (64, 64, 4, 4),
    (64, 32, 4, 3),
    (64, 16, 4, 2),
    (32, 16, 4, 1),  # the smallest: wide fp32 heads (D = 256)
]
# Rows per program of the Delta kernel: a memory-bound row sum, any moderate size works.
_DELTA_BLOCK_ROWS = 16 if KERNELS_INTERPRETED else 128


def _prune_dkdv_configs(configs, named_args, **kwargs):
    # A program keeps its K and V tiles and streams one Q and one dO tile per stage.
    return prune_to_fit(configs, named_args, kwargs, lambda c: (2 * c.kwargs["BLOCK_N"], 2 * c.kwargs["BLOCK_M"]))


def _prune_dq_configs(configs, named_args, **kwargs):
    # A program keeps its Q and dO tiles and streams one K and one V tile per stage.
    return prune_to_fit(configs, named_args, kwargs, lambda c: (2 * c.kwargs["BLOCK_M"], 2 * c.kwargs["BLOCK_N"]))


@triton.jit
def _delta_kernel(
    O, DO, DELTA,
    stride_ob, stride_oh, stride_on, stride_od,
    stride_gb, stride_gh, stride_gn, stride_gd,
    H, N_Q,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_ROWS: tl.constexpr,
):
    """Delta[b, h, i] = sum_d dO[b, h, i, d] * O[b, h, i, d] in fp32; DELTA is contiguous (B, H, Nq)."""
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_m[:, None] < N_Q) & (offs_d[None, :] < HEAD_DIM)
    o = tl.load(O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_on + offs_d[None, :] * stride_od,
                mask=mask, other=0.0)
    do = tl.load(DO + b * stride_gb + h * stride_gh + offs_m[:, None] * stride_gn + offs_d[None, :] * stride_gd,
                 mask=mask, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + pid_bh.to(tl.int64) * N_Q + offs_m, delta, mask=offs_m < N_Q)


@triton.jit
def _dkdv_tile(
    dk, dv, k, v,
    q_base, do_base, lse_base, delta_base,
    stride_qn, stride_qd, stride_gn, stride_gd,
    start_m, offs_n, offs_d, N_Q, qk_scale_log2, KV_SHIFT,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr,
    MASKED: tl.constexpr, CAUSAL: tl.constexpr, DOT_MODE: tl.constexpr,
):
    """Add one query tile's contribution to a key tile's dK and dV (transposed scores: keys x queries)."""
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
    ds_t = p_t * (dp_t - delta[None, :])
    dk += tile_dot(bf16_ready(ds_t, DOT_MODE).to(q.dtype), q, DOT_MODE)
    return dk, dv


@triton.autotune(
    configs=configs_for(_DKDV_GPU_TILES),
    key=["HEAD_DIM", "CAUSAL", "SEQ_BUCKET"],  # the autotuner adds the tensors' dtypes itself
    prune_configs_by={"early_config_prune": _prune_dkdv_configs},
)
@triton.jit
def _dkdv_kernel(
    Q, K, V, DO, LSE, DELTA, DK, DV,
    stride_qb, stride_qh, stride_qn, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_gb, stride_gh, stride_gn, stride_gd,
    stride_dkb, stride_dkh, stride_dkn, stride_dkd,
    stride_dvb, stride_dvh, stride_dvn, stride_dvd,
    qk_scale_log2, softmax_scale,
    H, KV_GROUP, N_Q, N_K, SEQ_BUCKET,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr, DOT_MODE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """One program: dK, dV of one key tile of one (batch, k/v head). LSE and DELTA are contiguous (B, H, Nq)."""
    pid_n = tl.program_id(0)
    pid_bhk = tl.program_id(1)
    h_kv_count = H // KV_GROUP
    b = (pid_bhk // h_kv_count).to(tl.int64)
    h_kv = (pid_bhk % h_kv_count).to(tl.int64)
    n0 = pid_n * BLOCK_N
    kv_shift = N_K - N_Q

    offs_n = n0 + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    kv_mask = (offs_n[:, None] < N_K) & (offs_d[None, :] < HEAD_DIM)
    k_base = K + b * stride_kb + h_kv * stride_kh
    v_base = V + b * stride_vb + h_kv * stride_vh
    k = load_tile(k_base, offs_n, offs_d, stride_kn, stride_kd, N_K, HEAD_DIM, BLOCK_D, True)
    v = load_tile(v_base, offs_n, offs_d, stride_vn, stride_vd, N_K, HEAD_DIM, BLOCK_D, True)
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)

    # Query tiles in three segments: [first_m, diag_end) crosses the causal
    # diagonal (masked), [diag_end, full_end) is complete and fully visible
    # (unmasked), [tail_start, N_Q) is the ragged last tile (masked).
    if CAUSAL:
        # Queries i < n0 - kv_shift see none of this key tile; i >= n0 + BLOCK_N - 1 - kv_shift see all of it.
        first_m = (tl.maximum(n0 - kv_shift, 0) // BLOCK_M) * BLOCK_M
        diag_end = tl.cdiv(tl.maximum(n0 + BLOCK_N - 1 - kv_shift, 0), BLOCK_M) * BLOCK_M
    else:
        first_m = 0
        diag_end = 0
    full_end = (N_Q // BLOCK_M) * BLOCK_M
    masked_end = tl.minimum(diag_end, tl.cdiv(N_Q, BLOCK_M) * BLOCK_M)
    tail_start = tl.maximum(diag_end, full_end)

    for g in range(KV_GROUP):  # every query head that shares this k/v head, in a fixed order
        h = h_kv * KV_GROUP + g
        q_base = Q + b * stride_qb + h * stride_qh
        do_base = DO + b * stride_gb + h * stride_gh
        row_offset = (b * H + h) * N_Q
        lse_base = LSE + row_offset
        delta_base = DELTA + row_offset
        for start_m in range(first_m, masked_end, BLOCK_M):
            dk, dv = _dkdv_tile(
                dk, dv, k, v, q_base, do_base, lse_base, delta_base,
                stride_qn, stride_qd, stride_gn, stride_gd,
                start_m, offs_n, offs_d, N_Q, qk_scale_log2, kv_shift,
                HEAD_DIM, BLOCK_M, BLOCK_D, True, CAUSAL, DOT_MODE,
            )
        for start_m in range(diag_end, full_end, BLOCK_M):
            dk, dv = _dkdv_tile(
                dk, dv, k, v, q_base, do_base, lse_base, delta_base,
                stride_qn, stride_qd, stride_gn, stride_gd,
                start_m, offs_n, offs_d, N_Q, qk_scale_log2, kv_shift,
                HEAD_DIM, BLOCK_M, BLOCK_D, False, CAUSAL, DOT_MODE,
            )
        for start_m in range(tail_start, N_Q, BLOCK_M):
            dk, dv = _dkdv_tile(
                dk, dv, k, v, q_base, do_base, lse_base, delta_base,
                stride_qn, stride_qd, stride_gn, stride_gd,
                start_m, offs_n, offs_d, N_Q, qk_scale_log2, kv_shift,
                HEAD_DIM, BLOCK_M, BLOCK_D, True, CAUSAL, DOT_MODE,
            )

    dk = dk * softmax_scale
    tl.store(DK + b * stride_dkb + h_kv * stride_dkh + offs_n[:, None] * stride_dkn + offs_d[None, :] * stride_dkd,
             bf16_ready(dk, DOT_MODE).to(DK.dtype.element_ty), mask=kv_mask)
    tl.store(DV + b * stride_dvb + h_kv * stride_dvh + offs_n[:, None] * stride_dvn + offs_d[None, :] * stride_dvd,
             bf16_ready(dv, DOT_MODE).to(DV.dtype.element_ty), mask=kv_mask)


@triton.jit
def _dq_tile(
    dq, q, do, lse, delta,
    k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
    start_n, offs_m, offs_d, N_K, qk_scale_log2, KV_SHIFT,
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    MASKED: tl.constexpr, CAUSAL: tl.constexpr, DOT_MODE: tl.constexpr,
):
    """Add one key tile's contribution to a query tile's dQ (without the final scale)."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    k = load_tile(k_base, offs_n, offs_d, stride_kn, stride_kd, N_K, HEAD_DIM, BLOCK_D, MASKED)
    v = load_tile(v_base, offs_n, offs_d, stride_vn, stride_vd, N_K, HEAD_DIM, BLOCK_D, MASKED)
    s = tile_dot(q, tl.trans(k), DOT_MODE) * qk_scale_log2
    p = tl.exp2(s - lse[:, None] * LOG2_E_IN_KERNEL)
    if MASKED:
        visible = visible_keys(offs_m, offs_n, N_K, KV_SHIFT, CAUSAL)
        p = tl.where(visible, p, 0.0)  # see _dkdv_tile: p can be +inf where masked
    dp = tile_dot(do, tl.trans(v), DOT_MODE)
    ds = p * (dp - delta[:, None])
    dq += tile_dot(bf16_ready(ds, DOT_MODE).to(k.dtype), k, DOT_MODE)
    return dq


@triton.autotune(
    configs=configs_for(_DQ_GPU_TILES),
    key=["HEAD_DIM", "CAUSAL", "SEQ_BUCKET"],  # the autotuner adds the tensors' dtypes itself
    prune_configs_by={"early_config_prune": _prune_dq_configs},
)
@triton.jit
def _dq_kernel(
    Q, K, V, DO, LSE, DELTA, DQ,
    stride_qb, stride_qh, stride_qn, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_gb, stride_gh, stride_gn, stride_gd,
    stride_dqb, stride_dqh, stride_dqn, stride_dqd,
    qk_scale_log2, softmax_scale,
    H, KV_GROUP, N_Q, N_K, SEQ_BUCKET,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr, DOT_MODE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """One program: dQ of one query tile of one (batch, head). LSE and DELTA are contiguous (B, H, Nq)."""
    num_m = tl.cdiv(N_Q, BLOCK_M)
    pid_m = num_m - 1 - tl.program_id(0) if CAUSAL else tl.program_id(0)  # heavy tiles first
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    h_kv = h // KV_GROUP
    m0 = pid_m * BLOCK_M
    kv_shift = N_K - N_Q

    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    row_mask = (offs_m[:, None] < N_Q) & (offs_d[None, :] < HEAD_DIM)
    q = load_tile(Q + b * stride_qb + h * stride_qh, offs_m, offs_d, stride_qn, stride_qd, N_Q, HEAD_DIM, BLOCK_D, True)
    do_base = DO + b * stride_gb + h * stride_gh
    do = load_tile(do_base, offs_m, offs_d, stride_gn, stride_gd, N_Q, HEAD_DIM, BLOCK_D, True)
    row_offset = pid_bh.to(tl.int64) * N_Q
    lse = tl.load(LSE + row_offset + offs_m, mask=offs_m < N_Q, other=0.0)
    delta = tl.load(DELTA + row_offset + offs_m, mask=offs_m < N_Q, other=0.0)
    k_base = K + b * stride_kb + h_kv * stride_kh
    v_base = V + b * stride_vb + h_kv * stride_vh
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    unmasked_end, end = key_ranges(m0, N_K, kv_shift, BLOCK_M, BLOCK_N, CAUSAL)

    for start_n in range(0, unmasked_end, BLOCK_N):
        dq = _dq_tile(
            dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
            start_n, offs_m, offs_d, N_K, qk_scale_log2, kv_shift,
            HEAD_DIM, BLOCK_N, BLOCK_D, False, CAUSAL, DOT_MODE,
        )
    for start_n in range(unmasked_end, end, BLOCK_N):
        dq = _dq_tile(
            dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
            start_n, offs_m, offs_d, N_K, qk_scale_log2, kv_shift,
            HEAD_DIM, BLOCK_N, BLOCK_D, True, CAUSAL, DOT_MODE,
        )

    dq = dq * softmax_scale
    tl.store(DQ + b * stride_dqb + h * stride_dqh + offs_m[:, None] * stride_dqn + offs_d[None, :] * stride_dqd,
             bf16_ready(dq, DOT_MODE).to(DQ.dtype.element_ty), mask=row_mask)


launch_dkdv = TunedLaunch(_dkdv_kernel)
launch_dq = TunedLaunch(_dq_kernel)


def triton_backward(
    grad_out: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    causal: bool,
    softmax_scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Attention backward with the Triton kernels.

    Arguments:
        grad_out, out: ``(B, H, Nq, D)``, any strides (see ``triton_forward``), q's dtype.
        q: ``(B, H, Nq, D)``; k, v: ``(B, Hkv, Nk, D)``; the forward's inputs.
        lse: ``(B, H, Nq)`` float32, the forward's logsumexp (natural log).
        causal, softmax_scale: as in the forward.

    Returns:
        ``(dq, dk, dv)``, contiguous, with the shapes and dtype of q, k and v.
    """
    batch, heads, n_q, head_dim = q.shape
    kv_heads, n_k = k.shape[1], k.shape[2]
    dq = torch.empty((batch, heads, n_q, head_dim), dtype=q.dtype, device=q.device)
    dk = torch.empty((batch, kv_heads, n_k, head_dim), dtype=k.dtype, device=k.device)
    dv = torch.empty((batch, kv_heads, n_k, head_dim), dtype=v.dtype, device=v.device)
    if dq.numel() == 0 or dk.numel() == 0:
        # No query or no key: O does not depend on the inputs, every gradient is zero.
        return dq.zero_(), dk.zero_(), dv.zero_()

    q, k, v, out, grad_out = (
        within_int32_offsets(x, name)
        for x, name in ((q, "q"), (k, "k"), (v, "v"), (out, "out"), (grad_out, "grad_out"))
    )
    lse = lse.contiguous()
    delta = torch.empty((batch, heads, n_q), dtype=torch.float32, device=q.device)
    block_d = head_dim_block(head_dim)
    _delta_kernel[(triton.cdiv(n_q, _DELTA_BLOCK_ROWS), batch * heads)](
        out, grad_out, delta, *out.stride(), *grad_out.stride(), heads, n_q,
        HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_ROWS=_DELTA_BLOCK_ROWS,
    )
    shared = dict(
        qk_scale_log2=softmax_scale * LOG2_E,
        softmax_scale=softmax_scale,
        H=heads,
        KV_GROUP=heads // kv_heads,
        N_Q=n_q,
        N_K=n_k,
        SEQ_BUCKET=seq_len_bucket(max(n_q, n_k)),
        HEAD_DIM=head_dim,
        BLOCK_D=block_d,
        CAUSAL=causal,
        DOT_MODE=dot_mode(q.dtype),
    )
    tuning_key = (head_dim, causal, shared["SEQ_BUCKET"], q.dtype)
    launch_dkdv(
        tuning_key, lambda meta: (triton.cdiv(n_k, meta["BLOCK_N"]), batch * kv_heads),
        q, k, v, grad_out, lse, delta, dk, dv,
        *q.stride(), *k.stride(), *v.stride(), *grad_out.stride(), *dk.stride(), *dv.stride(),
        **shared,
    )
    launch_dq(
        tuning_key, lambda meta: (triton.cdiv(n_q, meta["BLOCK_M"]), batch * heads),
        q, k, v, grad_out, lse, delta, dq,
        *q.stride(), *k.stride(), *v.stride(), *grad_out.stride(), *dq.stride(),
        **shared,
    )
    return dq, dk, dv
