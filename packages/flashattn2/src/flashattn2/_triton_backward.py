"""FlashAttention-2 backward pass in Triton: two kernels, their one-launch combination, and the launcher.

With ``P = softmax(scale * Q K^T)`` recomputed tile by tile from the saved row
logsumexp ``L`` (``P_ij = exp(scale * q_i . k_j - L_i)``), the gradients are
(FA2 paper, Algorithm 2, Dao 2023, arXiv:2307.08691)::

    dV = P^T dO
    dP = dO V^T
    dS = P * (dP - Delta),  Delta_i = rowsum(dO_i * O_i)
    dQ = scale * dS K
    dK = scale * dS^T Q

1. ``_dq_kernel``: one program per query tile computes the tile's ``Delta``
   (stored for the next kernel) and its dQ, looping over the key tiles.
2. ``_dkdv_kernel``: one program per key/value tile, looping over the query
   tiles (and, with grouped-query attention, over every query head that shares
   this k/v head), accumulating dK and dV in registers.

Short sequences in fp16 and bf16 (``ONE_LAUNCH_MAX_SCORES``), where launches
cost more host time than the kernels take on the GPU, run both as
``_one_launch_kernel``: the two kernels' programs in one grid, the dK/dV
programs computing Delta themselves.

Causal programs start with the tiles that have the most work, across all
(batch, head) pairs where what they read again stays in L2
(``ALL_PAIRS_L2_SHARE``), else ``BEYOND_L2_HEAD_GROUP`` pairs at a time.

Each output element is written by exactly one program and summed in a fixed
order: there are no atomics, so identical inputs give bitwise-identical
gradients. The price is that both kernels compute ``S`` and ``dP``: seven tile
products per (query tile, key tile) pair instead of the five of a single pass
that adds dQ across key tiles (benchmarks/NOTES.md has the measurements of
such a kernel in Triton, with ordered and with atomic dQ accumulation, which
lost at every shape tried). The causal split (unmasked tiles, masked diagonal
tiles, skipped tiles) mirrors the forward kernel.

On a Hopper GPU, long sequences at head dim 64, 128 or 256 in fp16 or bf16 run the
five-product kernel of :mod:`flashattn2._gluon_backward` instead, deterministic
too (``hopper_backward_applies`` says where).

A forward whose inputs require grad starts compiling these kernels for its
backward on worker threads (:func:`compile_backward_early`), so that a new
layout's first backward does not wait for its compile.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from flashattn2 import _hopper
from flashattn2._configs import TileKey, autotuning
from flashattn2._launch import (
    PLAN_CACHE_SIZE,
    CompiledLaunch,
    TileChooser,
    alignments,
    allocator,
    background_compiles_enabled,
    causal_head_group,
    on_its_device,
)
from flashattn2._triton_common import (
    KERNELS_INTERPRETED,
    LOG2_E,
    LOG2_E_IN_KERNEL,
    bf16_ready,
    contiguous_strides,
    dot_mode,
    head_dim_block,
    heaviest_first,
    key_ranges,
    load_tile,
    needs_contiguous_copy,
    seq_len_bucket,
    tile_dot,
    visible_keys,
)


@triton.jit
def _dkdv_tile(
    dk,
    dv,
    k,
    v,
    q_base,
    do_base,
    o_base,
    lse_base,
    delta_base,
    stride_qn,
    stride_qd,
    stride_gn,
    stride_gd,
    stride_on,
    stride_od,
    start_m,
    offs_n,
    offs_d,
    N_Q,
    qk_scale_log2,
    KV_SHIFT,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_D: tl.constexpr,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_MODE: tl.constexpr,
    DELTA_FROM_O: tl.constexpr,
):
    """Add one query tile's contribution to a key tile's dK and dV (transposed scores: keys x queries).
    Delta is read from ``delta_base``, or with ``DELTA_FROM_O`` computed from the O and dO tiles."""
    offs_m = start_m + tl.arange(0, BLOCK_M)
    q = load_tile(q_base, offs_m, offs_d, stride_qn, stride_qd, N_Q, HEAD_DIM, BLOCK_D, MASKED)
    do = load_tile(do_base, offs_m, offs_d, stride_gn, stride_gd, N_Q, HEAD_DIM, BLOCK_D, MASKED)
    lse = tl.load(lse_base + offs_m, mask=offs_m < N_Q, other=0.0) if MASKED else tl.load(lse_base + offs_m)
    if DELTA_FROM_O:
        o = load_tile(o_base, offs_m, offs_d, stride_on, stride_od, N_Q, HEAD_DIM, BLOCK_D, MASKED)
        delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    elif MASKED:
        delta = tl.load(delta_base + offs_m, mask=offs_m < N_Q, other=0.0)
    else:
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


@triton.jit
def _dkdv_kernel(
    Q,
    K,
    V,
    O,
    DO,
    LSE,
    DELTA,
    DK,
    DV,
    stride_qb,
    stride_qh,
    stride_qn,
    stride_qd,
    stride_kb,
    stride_kh,
    stride_kn,
    stride_kd,
    stride_vb,
    stride_vh,
    stride_vn,
    stride_vd,
    stride_ob,
    stride_oh,
    stride_on,
    stride_od,
    stride_gb,
    stride_gh,
    stride_gn,
    stride_gd,
    stride_dkb,
    stride_dkh,
    stride_dkn,
    stride_dkd,
    stride_dvb,
    stride_dvh,
    stride_dvn,
    stride_dvd,
    qk_scale_log2,
    softmax_scale,
    H,
    KV_GROUP,
    N_Q,
    N_K,
    program_x,
    program_y,
    HEAD_GROUP,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_MODE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DELTA_FROM_O: tl.constexpr,
):
    """One program: dK, dV of one key tile of one (batch, k/v head). LSE and DELTA are contiguous (B, H, Nq).

    ``(program_x, program_y)``: the program's (key tile, (batch, k/v head)) coordinates;
    ``(-1, -1)`` in a launch of this kernel alone, whose grid gives them (causal: a 1-D grid in
    :func:`heaviest_first` order over ``HEAD_GROUP`` pairs, the first key tiles being the heaviest). With
    ``DELTA_FROM_O`` the program computes Delta from O and dO itself (DELTA is unused).
    """
    if CAUSAL:
        tiles = tl.cdiv(N_K, BLOCK_N)
        grid_y, grid_x = heaviest_first(tl.program_id(0), tl.num_programs(0) // tiles, tiles, HEAD_GROUP)
    else:
        grid_x, grid_y = tl.program_id(0), tl.program_id(1)
    pid_n = tl.where(program_x < 0, grid_x, program_x)
    pid_bhk = tl.where(program_y < 0, grid_y, program_y)
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
        o_base = O + b * stride_ob + h * stride_oh
        row_offset = (b * H + h) * N_Q
        lse_base = LSE + row_offset
        delta_base = DELTA + row_offset
        for start_m in range(first_m, masked_end, BLOCK_M):
            dk, dv = _dkdv_tile(
                dk,
                dv,
                k,
                v,
                q_base,
                do_base,
                o_base,
                lse_base,
                delta_base,
                stride_qn,
                stride_qd,
                stride_gn,
                stride_gd,
                stride_on,
                stride_od,
                start_m,
                offs_n,
                offs_d,
                N_Q,
                qk_scale_log2,
                kv_shift,
                HEAD_DIM,
                BLOCK_M,
                BLOCK_D,
                True,
                CAUSAL,
                DOT_MODE,
                DELTA_FROM_O,
            )
        for start_m in range(diag_end, full_end, BLOCK_M):
            dk, dv = _dkdv_tile(
                dk,
                dv,
                k,
                v,
                q_base,
                do_base,
                o_base,
                lse_base,
                delta_base,
                stride_qn,
                stride_qd,
                stride_gn,
                stride_gd,
                stride_on,
                stride_od,
                start_m,
                offs_n,
                offs_d,
                N_Q,
                qk_scale_log2,
                kv_shift,
                HEAD_DIM,
                BLOCK_M,
                BLOCK_D,
                False,
                CAUSAL,
                DOT_MODE,
                DELTA_FROM_O,
            )
        for start_m in range(tail_start, N_Q, BLOCK_M):
            dk, dv = _dkdv_tile(
                dk,
                dv,
                k,
                v,
                q_base,
                do_base,
                o_base,
                lse_base,
                delta_base,
                stride_qn,
                stride_qd,
                stride_gn,
                stride_gd,
                stride_on,
                stride_od,
                start_m,
                offs_n,
                offs_d,
                N_Q,
                qk_scale_log2,
                kv_shift,
                HEAD_DIM,
                BLOCK_M,
                BLOCK_D,
                True,
                CAUSAL,
                DOT_MODE,
                DELTA_FROM_O,
            )

    dk = dk * softmax_scale
    tl.store(
        DK + b * stride_dkb + h_kv * stride_dkh + offs_n[:, None] * stride_dkn + offs_d[None, :] * stride_dkd,
        bf16_ready(dk, DOT_MODE).to(DK.dtype.element_ty),
        mask=kv_mask,
    )
    tl.store(
        DV + b * stride_dvb + h_kv * stride_dvh + offs_n[:, None] * stride_dvn + offs_d[None, :] * stride_dvd,
        bf16_ready(dv, DOT_MODE).to(DV.dtype.element_ty),
        mask=kv_mask,
    )


@triton.jit
def _dq_tile(
    dq,
    q,
    do,
    lse,
    delta,
    k_base,
    v_base,
    stride_kn,
    stride_kd,
    stride_vn,
    stride_vd,
    start_n,
    offs_m,
    offs_d,
    N_K,
    qk_scale_log2,
    KV_SHIFT,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_MODE: tl.constexpr,
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


@triton.jit
def _dq_kernel(
    Q,
    K,
    V,
    O,
    DO,
    LSE,
    DELTA,
    DQ,
    stride_qb,
    stride_qh,
    stride_qn,
    stride_qd,
    stride_kb,
    stride_kh,
    stride_kn,
    stride_kd,
    stride_vb,
    stride_vh,
    stride_vn,
    stride_vd,
    stride_ob,
    stride_oh,
    stride_on,
    stride_od,
    stride_gb,
    stride_gh,
    stride_gn,
    stride_gd,
    stride_dqb,
    stride_dqh,
    stride_dqn,
    stride_dqd,
    qk_scale_log2,
    softmax_scale,
    H,
    KV_GROUP,
    N_Q,
    N_K,
    program_x,
    program_y,
    HEAD_GROUP,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_MODE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    STORE_DELTA: tl.constexpr,
):
    """One program: Delta and dQ of one query tile of one (batch, head). LSE and DELTA are contiguous (B, H, Nq).

    ``Delta_i = rowsum(dO_i * O_i)`` (fp32) is computed from the dO tile the
    program loads anyway and, with ``STORE_DELTA``, stored for the dK/dV kernel,
    which runs next. ``(program_x, program_y)``: the program's coordinates in this
    kernel's grid; ``(-1, -1)`` in a launch of this kernel alone, whose grid gives them (causal: a 1-D grid in
    :func:`heaviest_first` order over ``HEAD_GROUP`` pairs).
    """
    num_m = tl.cdiv(N_Q, BLOCK_M)
    if CAUSAL:
        grid_y, grid_x = heaviest_first(tl.program_id(0), tl.num_programs(0) // num_m, num_m, HEAD_GROUP)
    else:
        grid_x, grid_y = tl.program_id(0), tl.program_id(1)
    pid_x = tl.where(program_x < 0, grid_x, program_x)
    pid_m = num_m - 1 - pid_x if CAUSAL else pid_x  # heavy tiles first
    pid_bh = tl.where(program_y < 0, grid_y, program_y)
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
    o = load_tile(O + b * stride_ob + h * stride_oh, offs_m, offs_d, stride_on, stride_od, N_Q, HEAD_DIM, BLOCK_D, True)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    if STORE_DELTA:
        tl.store(DELTA + row_offset + offs_m, delta, mask=offs_m < N_Q)
    k_base = K + b * stride_kb + h_kv * stride_kh
    v_base = V + b * stride_vb + h_kv * stride_vh
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    unmasked_end, end = key_ranges(m0, N_K, kv_shift, BLOCK_M, BLOCK_N, CAUSAL)

    for start_n in range(0, unmasked_end, BLOCK_N):
        dq = _dq_tile(
            dq,
            q,
            do,
            lse,
            delta,
            k_base,
            v_base,
            stride_kn,
            stride_kd,
            stride_vn,
            stride_vd,
            start_n,
            offs_m,
            offs_d,
            N_K,
            qk_scale_log2,
            kv_shift,
            HEAD_DIM,
            BLOCK_N,
            BLOCK_D,
            False,
            CAUSAL,
            DOT_MODE,
        )
    for start_n in range(unmasked_end, end, BLOCK_N):
        dq = _dq_tile(
            dq,
            q,
            do,
            lse,
            delta,
            k_base,
            v_base,
            stride_kn,
            stride_kd,
            stride_vn,
            stride_vd,
            start_n,
            offs_m,
            offs_d,
            N_K,
            qk_scale_log2,
            kv_shift,
            HEAD_DIM,
            BLOCK_N,
            BLOCK_D,
            True,
            CAUSAL,
            DOT_MODE,
        )

    dq = dq * softmax_scale
    tl.store(
        DQ + b * stride_dqb + h * stride_dqh + offs_m[:, None] * stride_dqn + offs_d[None, :] * stride_dqd,
        bf16_ready(dq, DOT_MODE).to(DQ.dtype.element_ty),
        mask=row_mask,
    )


@triton.jit
def _one_launch_kernel(
    Q,
    K,
    V,
    O,
    DO,
    LSE,
    DQ,
    DK,
    DV,
    stride_qb,
    stride_qh,
    stride_qn,
    stride_qd,
    stride_kb,
    stride_kh,
    stride_kn,
    stride_kd,
    stride_vb,
    stride_vh,
    stride_vn,
    stride_vd,
    stride_ob,
    stride_oh,
    stride_on,
    stride_od,
    stride_gb,
    stride_gh,
    stride_gn,
    stride_gd,
    stride_dqb,
    stride_dqh,
    stride_dqn,
    stride_dqd,
    stride_dkb,
    stride_dkh,
    stride_dkn,
    stride_dkd,
    stride_dvb,
    stride_dvh,
    stride_dvn,
    stride_dvd,
    qk_scale_log2,
    softmax_scale,
    H,
    KV_GROUP,
    N_Q,
    N_K,
    DQ_GRID_X,
    DQ_PROGRAMS,
    DKDV_GRID_X,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_MODE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """The whole backward in one launch (1-D grid), for short sequences, where a launch costs more host
    time than the kernels take on the GPU: programs ``[0, DQ_PROGRAMS)`` are the dQ kernel's (its grid
    ``DQ_GRID_X x (B * H)``, row by row), the others the dK/dV kernel's (``DKDV_GRID_X x (B * Hkv)``),
    which compute Delta from O and dO themselves instead of waiting for the dQ programs to store it."""
    pid = tl.program_id(0)
    if pid < DQ_PROGRAMS:
        _dq_kernel(
            Q,
            K,
            V,
            O,
            DO,
            LSE,
            LSE,  # DELTA: not stored
            DQ,
            stride_qb,
            stride_qh,
            stride_qn,
            stride_qd,
            stride_kb,
            stride_kh,
            stride_kn,
            stride_kd,
            stride_vb,
            stride_vh,
            stride_vn,
            stride_vd,
            stride_ob,
            stride_oh,
            stride_on,
            stride_od,
            stride_gb,
            stride_gh,
            stride_gn,
            stride_gd,
            stride_dqb,
            stride_dqh,
            stride_dqn,
            stride_dqd,
            qk_scale_log2,
            softmax_scale,
            H,
            KV_GROUP,
            N_Q,
            N_K,
            pid % DQ_GRID_X,
            pid // DQ_GRID_X,
            1,  # HEAD_GROUP: the coordinates are given
            HEAD_DIM,
            BLOCK_D,
            CAUSAL,
            DOT_MODE,
            BLOCK_M,
            BLOCK_N,
            False,
        )
    else:
        pid -= DQ_PROGRAMS
        _dkdv_kernel(
            Q,
            K,
            V,
            O,
            DO,
            LSE,
            LSE,  # DELTA: computed from O and dO
            DK,
            DV,
            stride_qb,
            stride_qh,
            stride_qn,
            stride_qd,
            stride_kb,
            stride_kh,
            stride_kn,
            stride_kd,
            stride_vb,
            stride_vh,
            stride_vn,
            stride_vd,
            stride_ob,
            stride_oh,
            stride_on,
            stride_od,
            stride_gb,
            stride_gh,
            stride_gn,
            stride_gd,
            stride_dkb,
            stride_dkh,
            stride_dkn,
            stride_dkd,
            stride_dvb,
            stride_dvh,
            stride_dvn,
            stride_dvd,
            qk_scale_log2,
            softmax_scale,
            H,
            KV_GROUP,
            N_Q,
            N_K,
            pid % DKDV_GRID_X,
            pid // DKDV_GRID_X,
            1,  # HEAD_GROUP: the coordinates are given
            HEAD_DIM,
            BLOCK_D,
            CAUSAL,
            DOT_MODE,
            BLOCK_M,
            BLOCK_N,
            True,
        )


dq_tiles = TileChooser()
dkdv_tiles = TileChooser()
one_launch_tiles = TileChooser()
# Problems of at most this many (batch, head, query, key) scores run the backward as one launch
# (_one_launch_kernel). benchmarks/one_launch.py on the H100: one launch took 5-8% less time per eager
# forward+backward at every shape measured up to 16.8M scores at head dim 64 and 4.2M at 128
# (BENCHMARKS.md); the bound is the largest measured at both.
ONE_LAUNCH_MAX_SCORES = 4 * 1024 * 1024
# The dtypes whose short sequences run as one launch. fp32 runs the two kernels at every length: its one-launch
# kernel (three tf32 products per tile product) took 9.1 s to compile for sm_90 on 2 CPU cores, against 2.4 and
# 4.4 s for the dQ and dK/dV kernels, which a first call compiles side by side while the forward runs
# (benchmarks/NOTES.md, v133). A new layout's first call matters more there than one launch's host time.
ONE_LAUNCH_DTYPES = (torch.float16, torch.bfloat16)
# Causal launches of the dQ (dK/dV) kernel interleave every (batch, head) pair's query (key) tiles, heaviest first
# over the whole launch, where all pairs' K and V (Q and dO) take at most this share of L2; elsewhere one pair's
# tiles follow another's. On an H100 (50 MiB of L2) that took 0.83-0.96x the forward+backward's time at seven
# shapes with 4-16 MiB of K and V, 0.96-1.00x at four with 32 MiB, 1.04x with 48 MiB and 1.08-1.12x with 64 MiB
# (benchmarks/NOTES.md, v135).
ALL_PAIRS_L2_SHARE = 2 / 3
# Beyond that share, causal launches interleave this many pairs at a time: 0.97-1.00x the forward+backward's time
# of pair-by-pair launches at six shapes with 48-64 MiB of K and V on an H100, four pairs 0.99-1.01x, as many as
# the share holds (60-130) 0.99-1.13x (benchmarks/NOTES.md, v136, v137).
BEYOND_L2_HEAD_GROUP = 16


class BackwardPlan:
    """The backward for one layout: ``plan(grad_out, q, k, v, out, lse) -> (dq, dk, dv)``.

    See :func:`triton_backward`. Built from the layout alone (with ``aligned``, the inputs' pointer alignments:
    the compiled kernels are specialized on them, and the Hopper kernel needs them); the tiles are chosen on the
    first call, which sees the tensors (autotuning times them).
    """

    def __init__(
        self,
        q_shape,
        q_stride,
        k_shape,
        k_stride,
        v_stride,
        out_stride,
        grad_stride,
        dtype,
        device,
        causal,
        softmax_scale,
        aligned,
    ):
        batch, heads, n_q, head_dim = q_shape
        kv_heads, n_k = k_shape[1], k_shape[2]
        self.dtype, self.device = dtype, device
        self.same_shapes = q_shape == k_shape  # no grouped-query heads: dq, dk, dv can share one buffer
        self.causal, self.head_dim = causal, head_dim
        self.empty = 0 in q_shape or 0 in k_shape
        # The first n_q - n_k queries see no key when causal: no key tile writes their dQ.
        self.zero_dq = causal and n_q > n_k
        shapes = (q_shape, k_shape, k_shape, q_shape, q_shape)
        strides = (q_stride, k_stride, v_stride, out_stride, grad_stride)
        self.copy = tuple(
            needs_contiguous_copy(shape, stride, name)
            for shape, stride, name in zip(shapes, strides, ("q", "k", "v", "out", "grad_out"))
        )
        q_stride, k_stride, v_stride, out_stride, grad_stride = (
            contiguous_strides(shape) if copy else stride for shape, stride, copy in zip(shapes, strides, self.copy)
        )
        dq_stride, dkv_stride = contiguous_strides(q_shape), contiguous_strides(k_shape)
        shared = (softmax_scale * LOG2_E, softmax_scale, heads, heads // max(kv_heads, 1), n_q, n_k)
        own_grid = (-1, -1)  # program coordinates: a kernel launched alone takes them from its grid
        kv_bytes = batch * kv_heads * n_k * head_dim * 2 * dtype.itemsize  # K and V: what dQ programs read again
        q_bytes = batch * heads * n_q * head_dim * 2 * dtype.itemsize  # Q and dO: what dK/dV programs read again
        dq_group = causal_head_group(causal, batch * heads, kv_bytes, ALL_PAIRS_L2_SHARE, device, BEYOND_L2_HEAD_GROUP)
        dkdv_group = causal_head_group(
            causal, batch * kv_heads, q_bytes, ALL_PAIRS_L2_SHARE, device, BEYOND_L2_HEAD_GROUP
        )
        self.dq_scalars = (
            *(*q_stride, *k_stride, *v_stride, *out_stride, *grad_stride, *dq_stride),
            *shared,
            *own_grid,
            dq_group,
        )
        self.dkdv_scalars = (
            *(*q_stride, *k_stride, *v_stride, *out_stride, *grad_stride, *dkv_stride, *dkv_stride),
            *shared,
            *own_grid,
            dkdv_group,
        )
        self.one_launch_scalars = (
            *(*q_stride, *k_stride, *v_stride, *out_stride, *grad_stride, *dq_stride, *dkv_stride, *dkv_stride),
            *shared,
        )
        self.new_delta = allocator((batch * heads * n_q,), torch.float32, device)
        # dq, dk and dv: one buffer where they have one shape (unbound into three), else one each
        self.new_grads = allocator((3, *q_shape), dtype, device) if self.same_shapes else None
        self.new_dq, self.new_dkv = allocator(q_shape, dtype, device), allocator(k_shape, dtype, device)
        self.n_q, self.n_k = n_q, n_k
        self.query_heads, self.kv_heads = batch * heads, batch * kv_heads  # (batch, head) pairs
        self.tile_key = TileKey(head_dim, dtype, causal, device, seq_len_bucket(max(n_q, n_k)))
        self.one_launch = dtype in ONE_LAUNCH_DTYPES and batch * heads * n_q * n_k <= ONE_LAUNCH_MAX_SCORES
        self.launch_dq = self.launch_dkdv = self.launch_one = None
        tma_strides = (q_stride, k_stride, v_stride, grad_stride)
        self.hopper = None  # the Gluon kernel where it applies
        hopper = None if self.empty else _hopper.gluon_module("backward", device)
        if hopper and hopper.hopper_backward_applies(q_shape, k_shape, tma_strides, dtype, device, causal, aligned):
            self.hopper = hopper.HopperBackward(
                q_shape, k_shape, out_stride, grad_stride, dtype, device, causal, softmax_scale
            )

    def _constexprs(self, tile) -> dict:
        return dict(
            HEAD_DIM=self.head_dim,
            BLOCK_D=head_dim_block(self.head_dim),
            CAUSAL=self.causal,
            DOT_MODE=dot_mode(self.dtype),
            BLOCK_M=tile.block_m,
            BLOCK_N=tile.block_n,
        )

    def compiled_dq(self, tile) -> CompiledLaunch:
        q_tiles = triton.cdiv(self.n_q, tile.block_m)
        grid = (q_tiles * self.query_heads, 1, 1) if self.causal else (q_tiles, self.query_heads, 1)
        constexprs = self._constexprs(tile) | {"STORE_DELTA": True}
        return CompiledLaunch(_dq_kernel, grid, self.dq_scalars, constexprs, tile, self.device)

    def compiled_dkdv(self, tile) -> CompiledLaunch:
        k_tiles = triton.cdiv(self.n_k, tile.block_n)
        grid = (k_tiles * self.kv_heads, 1, 1) if self.causal else (k_tiles, self.kv_heads, 1)
        constexprs = self._constexprs(tile) | {"DELTA_FROM_O": False}
        return CompiledLaunch(_dkdv_kernel, grid, self.dkdv_scalars, constexprs, tile, self.device)

    def compiled_one_launch(self, tile) -> CompiledLaunch:
        dq_grid_x, dkdv_grid_x = triton.cdiv(self.n_q, tile.block_m), triton.cdiv(self.n_k, tile.block_n)
        dq_programs = dq_grid_x * self.query_heads
        grid = (dq_programs + dkdv_grid_x * self.kv_heads, 1, 1)
        scalars = (*self.one_launch_scalars, dq_grid_x, dq_programs, dkdv_grid_x)
        return CompiledLaunch(_one_launch_kernel, grid, scalars, self._constexprs(tile), tile, self.device)

    def compile_early(self, q, k, v) -> None:
        """Start compiling the Triton kernels of this plan's first call on worker threads, with their tiles from
        the table (:meth:`flashattn2._launch.CompiledLaunch.compile_in_background`). ``q``, ``k``, ``v``: 16-byte
        aligned; they stand in for every tensor argument of their dtype, as the call's will all be aligned: out,
        grad_out and lse freshly allocated, dq, dk, dv from one buffer whose parts start at multiples of 16
        bytes. Where the Hopper kernel runs, its kernels instead
        (:meth:`flashattn2._gluon_backward.HopperBackward.compile_early`). Does nothing where the call's tensors
        may be unaligned."""
        if self.empty or self.launch_one or self.launch_dq:
            return
        if self.same_shapes and q.numel() * q.element_size() % 16:  # dk and dv, views of dq's buffer, unaligned
            return
        if self.hopper is not None:
            self.hopper.compile_early()
            return
        lse = torch.empty(1, dtype=torch.float32, device=self.device)  # for L and Delta: float32, aligned
        if self.one_launch:
            self.launch_one = self.compiled_one_launch(one_launch_tiles.choose(self.tile_key, None, "one_launch"))
            self.launch_one.compile_in_background(q, k, v, q, q, lse, q, k, v)
        else:
            self.launch_dq = self.compiled_dq(dq_tiles.choose(self.tile_key, None, "dq"))
            self.launch_dkdv = self.compiled_dkdv(dkdv_tiles.choose(self.tile_key, None, "dkdv"))
            self.launch_dq.compile_in_background(q, k, v, q, q, lse, lse, q)
            self.launch_dkdv.compile_in_background(q, k, v, q, q, lse, lse, k, v)

    def __call__(self, grad_out, q, k, v, out, lse, one_allocation=True):
        if one_allocation and self.same_shapes:
            dq, dk, dv = self.new_grads().unbind(0)
        else:
            dq, dk, dv = self.new_dq(), self.new_dkv(), self.new_dkv()
        if self.empty:  # no query or no key: O does not depend on the inputs, every gradient is zero
            return dq.zero_(), dk.zero_(), dv.zero_()
        if self.zero_dq:
            dq.zero_()
        if True in self.copy:
            q, k, v, out, grad_out = (
                x.contiguous() if copy else x for x, copy in zip((q, k, v, out, grad_out), self.copy)
            )
        lse = lse.contiguous()
        if self.hopper is not None:
            if _hopper.run_or_give_up("backward", self.hopper, grad_out, q, k, v, out, lse, dq, dk, dv):
                return dq, dk, dv
            self.hopper = None
        if self.one_launch:
            if self.launch_one is None:
                tile = one_launch_tiles.choose(
                    self.tile_key,
                    lambda t: self.compiled_one_launch(t)(q, k, v, out, grad_out, lse, dq, dk, dv),
                    "one_launch",
                )
                self.launch_one = self.compiled_one_launch(tile)
            self.launch_one(q, k, v, out, grad_out, lse, dq, dk, dv)
            return dq, dk, dv
        delta = self.new_delta()
        if self.launch_dq is None:
            self._choose_tiles(grad_out, q, k, v, out, lse, delta, dq, dk, dv)
        self.launch_dq(q, k, v, out, grad_out, lse, delta, dq)  # also writes Delta, which dK/dV reads
        self.launch_dkdv(q, k, v, out, grad_out, lse, delta, dk, dv)
        return dq, dk, dv

    def _choose_tiles(self, grad_out, q, k, v, out, lse, delta, dq, dk, dv) -> None:
        dq_tile = dq_tiles.choose(
            self.tile_key, lambda t: self.compiled_dq(t)(q, k, v, out, grad_out, lse, delta, dq), "dq"
        )
        self.launch_dq = self.compiled_dq(dq_tile)
        delta_written = False

        def time_dkdv(tile):
            nonlocal delta_written
            if not delta_written:  # the dK/dV candidates read Delta, which the dQ kernel writes
                self.launch_dq(q, k, v, out, grad_out, lse, delta, dq)
                delta_written = True
            self.compiled_dkdv(tile)(q, k, v, out, grad_out, lse, delta, dk, dv)

        self.launch_dkdv = self.compiled_dkdv(dkdv_tiles.choose(self.tile_key, time_dkdv, "dkdv"))


# The plan of each layout, built on its first call: backward_plan(*BackwardPlan's arguments).
backward_plan = functools.lru_cache(maxsize=PLAN_CACHE_SIZE)(BackwardPlan)


def triton_backward(
    grad_out: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    causal: bool,
    softmax_scale: float,
    one_allocation: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Attention backward with the Triton kernels (on Hopper GPUs, long sequences at head dim 64, 128 or 256:
    the Gluon kernel of :mod:`flashattn2._gluon_backward`).

    Arguments:
        grad_out, out: ``(B, H, Nq, D)``, any strides (see ``triton_forward``; a grad_out whose last
            stride is not 1, such as the expanded gradient of ``out.sum()``, is copied first, so that it
            runs as a contiguous one: the same kernels, and the Hopper kernel's TMA loads), q's dtype.
        q: ``(B, H, Nq, D)``; k, v: ``(B, Hkv, Nk, D)``; the forward's inputs.
        lse: ``(B, H, Nq)`` float32, the forward's logsumexp (natural log).
        causal, softmax_scale: as in the forward.
        one_allocation: where q, k and v have one shape (no grouped-query heads),
            allocate dq, dk and dv as views of one buffer (one allocation instead
            of three); ``False`` for callers whose outputs may not alias each
            other (``torch.library`` operators).

    Returns:
        ``(dq, dk, dv)``, contiguous, with the shapes and dtype of q, k and v.
    """
    if grad_out.stride(-1) != 1:
        grad_out = grad_out.contiguous()
    plan = plan_for(grad_out, q, k, v, out, causal, softmax_scale)
    return on_its_device(plan, q.device, grad_out, q, k, v, out, lse, one_allocation)


def compile_backward_early(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, softmax_scale: float):
    """Start compiling, on worker threads, the kernels (Triton, or the Hopper backward's) that the backward of
    ``triton_forward(q, k, v, causal, softmax_scale)`` will run where O and its gradient are contiguous
    (:meth:`BackwardPlan.compile_early`), or with a last stride other than 1 (copied first); a gradient of
    other strides has a plan of its own, which compiles on its first call. The forward calls it once per
    layout whose inputs require grad. Does nothing under Triton's interpreter, with ``FLASHATTN2_AUTOTUNE=1``
    (the first call times every candidate tile), with ``FLASHATTN2_BACKGROUND_COMPILE=0``, or for unaligned
    inputs."""
    if KERNELS_INTERPRETED or autotuning() or not background_compiles_enabled() or alignments(q, k, v) is not True:
        return
    out_stride = contiguous_strides(q.shape)
    plan = backward_plan(
        q.shape,
        q.stride(),
        k.shape,
        k.stride(),
        v.stride(),
        out_stride,
        out_stride,
        q.dtype,
        q.device,
        causal,
        softmax_scale,
        True,
    )
    plan.compile_early(q, k, v)


def plan_for(grad_out, q, k, v, out, causal: bool, softmax_scale: float) -> BackwardPlan:
    """The :class:`BackwardPlan` that :func:`triton_backward` runs for these tensors."""
    return backward_plan(
        q.shape,
        q.stride(),
        k.shape,
        k.stride(),
        v.stride(),
        out.stride(),
        grad_out.stride(),
        q.dtype,
        q.device,
        causal,
        softmax_scale,
        alignments(q, k, v, out, grad_out),
    )
