"""FlashAttention-2 forward pass in Triton: the kernel and its launcher.

One program computes one tile of ``BLOCK_M`` query rows of one (batch, head): it
streams key/value tiles of ``BLOCK_N`` rows through on-chip memory, keeps the
running row maximum ``m`` and row sum ``l`` of the softmax (online softmax, FA2
paper Algorithm 1, Dao 2023, arXiv:2307.08691) and writes the output tile once,
together with the row logsumexp ``L`` that the backward pass needs.

Scores are kept in base 2: ``s2 = (q . k) * scale * log2(e)``, so that
``exp(scale * q . k - c) = exp2(s2 - c * log2(e))``; ``L`` is converted back to the
natural log when stored.

Causal masking (bottom-right aligned: query ``i`` sees key ``j`` iff
``j <= i + Nk - Nq``) splits the key loop in two: key tiles that every row of the
query tile sees in full run without any mask; the tiles crossing the diagonal
(and the ragged last tile) run with masks; tiles above the diagonal are never
visited. Programs are numbered so that the query tiles with the most work start
first, which shortens the tail of the launch: across all (batch, head) pairs where
their K and V stay in L2 (``ALL_PAIRS_L2_SHARE``), else pair by pair.

On a Hopper GPU, fp16 and bf16 at head dim 64, 128 or 256 run the warp-specialized
kernel of :mod:`flashattn2._gluon_forward` instead (``hopper_forward_applies``
says where).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from flashattn2 import _hopper
from flashattn2._configs import TileKey
from flashattn2._launch import (
    PLAN_CACHE_SIZE,
    CompiledLaunch,
    TileChooser,
    alignments,
    allocator,
    causal_head_group,
    on_its_device,
)
from flashattn2._triton_backward import compile_backward_early
from flashattn2._triton_common import (
    LOG2_E,
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
def _forward_tile(
    acc,
    m_i,
    l_i,
    q,
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
    NEGATIVE_SCALE: tl.constexpr,
):
    """Fold one key/value tile into the running (acc, m_i, l_i) of a query tile."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    k = load_tile(k_base, offs_n, offs_d, stride_kn, stride_kd, N_K, HEAD_DIM, BLOCK_D, MASKED)
    v = load_tile(v_base, offs_n, offs_d, stride_vn, stride_vd, N_K, HEAD_DIM, BLOCK_D, MASKED)
    qk = tile_dot(q, tl.trans(k), DOT_MODE)
    if MASKED:
        visible = visible_keys(offs_m, offs_n, N_K, KV_SHIFT, CAUSAL)
        s = tl.where(visible, qk * qk_scale_log2, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        # A row that has seen no visible key yet keeps m = -inf; subtracting 0
        # instead keeps exp2 at exp2(-inf) = 0 rather than exp2(nan).
        m_new = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(s - m_new[:, None])
    else:
        # The scale is applied inside the exponent's argument (one FMA per score):
        # the row maximum of the scaled scores is the scaled maximum of the raw ones,
        # or their minimum when the scale is negative.
        raw_max = tl.min(qk, 1) if NEGATIVE_SCALE else tl.max(qk, 1)
        m_new = tl.maximum(m_i, raw_max * qk_scale_log2)
        p = tl.exp2(qk * qk_scale_log2 - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tile_dot(bf16_ready(p, DOT_MODE).to(v.dtype), v, DOT_MODE)
    return acc, m_new, l_i


@triton.jit
def _forward_kernel(
    Q,
    K,
    V,
    O,
    LSE,
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
    stride_lb,
    stride_lh,
    stride_ln,
    qk_scale_log2,
    H,
    KV_GROUP,
    N_Q,
    N_K,
    HEAD_GROUP,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_MODE: tl.constexpr,
    NEGATIVE_SCALE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    num_m = tl.cdiv(N_Q, BLOCK_M)
    if CAUSAL:  # a 1-D grid: the last query tiles see the most keys; start them first
        pid_bh, rank = heaviest_first(tl.program_id(0), tl.num_programs(0) // num_m, num_m, HEAD_GROUP)
        pid_m = num_m - 1 - rank
    else:
        pid_m = tl.program_id(0)
        pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    h_kv = h // KV_GROUP  # grouped-query attention: KV_GROUP query heads share one k/v head
    m0 = pid_m * BLOCK_M
    kv_shift = N_K - N_Q  # bottom-right causal alignment: query i sees keys j <= i + kv_shift

    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    q = load_tile(Q + b * stride_qb + h * stride_qh, offs_m, offs_d, stride_qn, stride_qd, N_Q, HEAD_DIM, BLOCK_D, True)
    k_base = K + b * stride_kb + h_kv * stride_kh
    v_base = V + b * stride_vb + h_kv * stride_vh

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    unmasked_end, end = key_ranges(m0, N_K, kv_shift, BLOCK_M, BLOCK_N, CAUSAL)

    for start_n in range(0, unmasked_end, BLOCK_N):
        acc, m_i, l_i = _forward_tile(
            acc,
            m_i,
            l_i,
            q,
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
            NEGATIVE_SCALE,
        )
    for start_n in range(unmasked_end, end, BLOCK_N):
        acc, m_i, l_i = _forward_tile(
            acc,
            m_i,
            l_i,
            q,
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
            NEGATIVE_SCALE,
        )

    # Rows that saw no key at all (causal with Nq > Nk, or Nk == 0) get O = 0 and L = -inf.
    # (Written as l != 0 so that a NaN row sum stays NaN in O and L.)
    seen = l_i != 0.0
    l_safe = tl.where(seen, l_i, 1.0)
    o = acc / l_safe[:, None]
    # m_i is in base-2 units; ln(2) = 0.6931471805599453 converts it to the natural log.
    lse = tl.where(seen, m_i * 0.6931471805599453 + tl.log(l_safe), float("-inf"))
    o_ptrs = O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_on + offs_d[None, :] * stride_od
    o_mask = (offs_m[:, None] < N_Q) & (offs_d[None, :] < HEAD_DIM)
    tl.store(o_ptrs, bf16_ready(o, DOT_MODE).to(O.dtype.element_ty), mask=o_mask)
    lse_ptrs = LSE + b * stride_lb + h * stride_lh + offs_m * stride_ln
    tl.store(lse_ptrs, lse, mask=offs_m < N_Q)


forward_tiles = TileChooser()
# Causal launches interleave every (batch, head) pair's query tiles, heaviest first over the whole launch, where
# all pairs' K and V take at most this share of L2; elsewhere one pair's tiles follow another's. On an H100
# (50 MiB of L2) that took 0.74-0.96x the forward's time at five shapes with 8-16 MiB of K and V, 0.90-1.06x at
# four with 32 MiB, 1.10x with 48 MiB and 1.30-1.41x with 64 MiB (benchmarks/NOTES.md, v134).
ALL_PAIRS_L2_SHARE = 1 / 2


class ForwardPlan:
    """The forward for one input layout: ``plan(q, k, v) -> (O, L)``; see :func:`triton_forward`.

    Built from the layout alone (shapes, strides, dtype, device, mask, scale, and
    ``aligned``, the inputs' pointer alignments: the compiled kernel is specialized
    on them, and the Hopper kernel needs them); the tile is chosen on the first
    call, which sees the tensors (autotuning times them).
    """

    def __init__(self, q_shape, q_stride, k_shape, k_stride, v_stride, dtype, device, causal, softmax_scale, aligned):
        batch, heads, n_q, head_dim = q_shape
        kv_heads, n_k = k_shape[1], k_shape[2]
        lse_shape = (batch, heads, n_q)
        self.new_out, self.new_lse = allocator(q_shape, dtype, device), allocator(lse_shape, torch.float32, device)
        self.dtype, self.device, self.causal, self.head_dim = dtype, device, causal, head_dim
        self.softmax_scale, self.negative_scale = softmax_scale, softmax_scale < 0
        self.backward_compiled_early = False  # set by the first call whose inputs require grad
        # Views whose (batch, head) spans past the kernels' 32-bit offsets are copied (needs_contiguous_copy).
        self.copy = tuple(
            needs_contiguous_copy(shape, stride, name)
            for shape, stride, name in ((q_shape, q_stride, "q"), (k_shape, k_stride, "k"), (k_shape, v_stride, "v"))
        )
        q_stride, k_stride, v_stride = (
            contiguous_strides(shape) if copy else stride
            for shape, stride, copy in zip((q_shape, k_shape, k_shape), (q_stride, k_stride, v_stride), self.copy)
        )
        kv_bytes = batch * kv_heads * n_k * head_dim * 2 * dtype.itemsize  # K and V: what every query tile reads
        self.scalars = (
            *q_stride,
            *k_stride,
            *v_stride,
            *contiguous_strides(q_shape),
            *contiguous_strides(lse_shape),
            softmax_scale * LOG2_E,
            heads,
            heads // max(kv_heads, 1),
            n_q,
            n_k,
            causal_head_group(causal, batch * heads, kv_bytes, ALL_PAIRS_L2_SHARE, device),
        )
        self.n_q, self.query_heads = n_q, batch * heads  # query rows per head, (batch, head) pairs
        self.empty = 0 in q_shape  # no output element: nothing to launch
        self.tile_key = TileKey(head_dim, dtype, causal, device, seq_len_bucket(max(n_q, n_k)))
        self.launch = None
        self.hopper = None  # the Gluon kernel where it applies
        hopper = None if self.empty else _hopper.gluon_module("forward", device)
        tma_strides = (q_stride, k_stride, v_stride)
        if hopper and hopper.hopper_forward_applies(q_shape, k_shape, tma_strides, dtype, device, causal, aligned):
            self.hopper = hopper.HopperForward(q_shape, k_shape, dtype, device, causal, softmax_scale)

    def compiled_launch(self, tile) -> CompiledLaunch:
        q_tiles = triton.cdiv(self.n_q, tile.block_m)
        return CompiledLaunch(
            _forward_kernel,
            (q_tiles * self.query_heads, 1, 1) if self.causal else (q_tiles, self.query_heads, 1),
            self.scalars,
            dict(
                HEAD_DIM=self.head_dim,
                BLOCK_D=head_dim_block(self.head_dim),
                CAUSAL=self.causal,
                DOT_MODE=dot_mode(self.dtype),
                NEGATIVE_SCALE=self.negative_scale,
                BLOCK_M=tile.block_m,
                BLOCK_N=tile.block_n,
            ),
            tile,
            self.device,
        )

    def __call__(self, q, k, v):
        if not self.backward_compiled_early and (q.requires_grad or k.requires_grad or v.requires_grad):
            # a backward will likely follow: its kernels compile while this call compiles or runs its own
            self.backward_compiled_early = True
            compile_backward_early(q, k, v, self.causal, self.softmax_scale)
        o, lse = self.new_out(), self.new_lse()
        if self.empty:
            return o, lse
        if True in self.copy:
            q, k, v = (x.contiguous() if copy else x for x, copy in zip((q, k, v), self.copy))
        if self.hopper is not None:
            if _hopper.run_or_give_up("forward", self.hopper, q, k, v, o, lse):
                return o, lse
            self.hopper = None
        if self.launch is None:
            tile = forward_tiles.choose(
                self.tile_key,
                lambda t: self.compiled_launch(t)(q, k, v, o, lse),
                "forward",
            )
            self.launch = self.compiled_launch(tile)
        self.launch(q, k, v, o, lse)
        return o, lse


# The plan of each layout, built on its first call: forward_plan(*ForwardPlan's arguments).
forward_plan = functools.lru_cache(maxsize=PLAN_CACHE_SIZE)(ForwardPlan)


def triton_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, softmax_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention forward with the Triton kernel (on Hopper GPUs, fp16 and bf16 at head dim 64, 128 or 256: the
    Gluon kernel of :mod:`flashattn2._gluon_forward`, where ``hopper_forward_applies``).

    Arguments:
        q: ``(B, H, Nq, D)``; k, v: ``(B, Hkv, Nk, D)`` with ``H % Hkv == 0``; any
            strides (a view whose (batch, head) spans more than 2**31 elements is
            copied: see ``needs_contiguous_copy``); fp16, bf16 or fp32 (all three
            the same), already validated.
        causal: bottom-right aligned causal mask.
        softmax_scale: multiplies ``q . k`` before the softmax.

    Returns:
        ``(O, L)``: O ``(B, H, Nq, D)`` contiguous in q's dtype; L ``(B, H, Nq)``
        float32, the natural-log logsumexp of each row's scaled scores (``-inf``
        for a row that sees no key).
    """
    return on_its_device(plan_for(q, k, v, causal, softmax_scale), q.device, q, k, v)


def plan_for(q, k, v, causal: bool, softmax_scale: float) -> ForwardPlan:
    """The :class:`ForwardPlan` that :func:`triton_forward` runs for these tensors."""
    return forward_plan(
        q.shape,
        q.stride(),
        k.shape,
        k.stride(),
        v.stride(),
        q.dtype,
        q.device,
        causal,
        softmax_scale,
        alignments(q, k, v),
    )
