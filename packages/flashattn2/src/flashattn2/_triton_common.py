"""Pieces shared by the Triton forward and backward kernels.

- :data:`KERNELS_INTERPRETED`: whether the kernels were built for Triton's CPU
  interpreter (``TRITON_INTERPRET=1`` at import), which is how CI exercises the
  real kernels; :func:`interpreting`: the variable as it is now;
- :func:`dot_mode`: how a kernel must multiply tiles of a given dtype;
- :func:`tile_dot`: the ``tl.dot`` wrapper the kernels use; :func:`bf16_ready`:
  what the kernels apply before converting fp32 tiles to their output dtype;
- :func:`head_dim_block`: the padded head dimension the kernels tile with;
  :func:`seq_len_bucket`: the sequence-length part of an autotuning key;
- :func:`needs_contiguous_copy`: the launchers' guard for the kernels' 32-bit
  offsets within one (batch, head); :func:`contiguous_strides`;
- :func:`load_tile`, :func:`key_ranges`, :func:`visible_keys`: tile loads with
  the padding masks, the causal split of a query tile's key loop, and its mask;
- :func:`heaviest_first`: the order of a causal launch's programs.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

# log2(e): the kernels compute exp(x) as exp2(x * log2(e)) (exp2 is the native
# instruction on NVIDIA GPUs) and fold this factor into the softmax scale.
LOG2_E = 1.4426950408889634
LOG2_E_IN_KERNEL = tl.constexpr(LOG2_E)  # the same, usable inside @triton.jit functions

# Values of the ``DOT_MODE`` constexpr.
DOT_NATIVE = 0  # fp16/bf16 operands, fp32 accumulation: the tensor-core path
DOT_IEEE_FP32 = 1  # fp32 operands multiplied in full fp32 (no tf32 rounding)
DOT_UPCAST_FP32 = 2  # operands converted to fp32 first (interpreter, bf16; see dot_mode)
DOT_TF32X3 = 3  # fp32 operands split in two tf32 halves, three tensor-core products

# The smallest inner dimension tl.dot accepts is 16.
MIN_DOT_DIM = 16


def interpreting() -> bool:
    """True when ``TRITON_INTERPRET=1`` now (Triton's CPU interpreter, how CI exercises the real kernels)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


# Whether the kernels were built for the interpreter. ``@triton.jit`` decides it when a
# kernel is defined, that is when flashattn2 is imported (this module is imported
# before the kernel modules), from TRITON_INTERPRET as it is then; changing the
# variable later does not rebuild the kernels, so everything that must match them
# (tile sizes, how bf16 tiles are multiplied) reads this, not the variable.
KERNELS_INTERPRETED = interpreting()


# How fp32 tiles are multiplied on a GPU: DOT_TF32X3 or DOT_IEEE_FP32 (benchmarks compare the two).
FP32_DOT_MODE = DOT_TF32X3


def dot_mode(dtype: torch.dtype) -> int:
    """How the kernels multiply tiles of ``dtype``.

    fp32 does not use Triton's default for fp32 operands, tf32 (about 1e-3
    relative error, far worse than the fp32 PyTorch attention a user compares
    with). ``tf32x3`` splits each operand into a tf32 value and a tf32 remainder
    and adds three tensor-core products (the remainders' product is dropped):
    close to fp32 accuracy on the tensor cores. Full IEEE fp32 products run on
    the CUDA cores instead, and their unrolled code makes the kernels take many
    times longer to compile.

    Triton 3.9's interpreter computes ``tl.dot`` on bf16 operands wrongly (errors of
    1e10 on a 16x16 product of randn inputs, while fp16 and fp32 are exact), so
    under the interpreter bf16 tiles are converted to fp32 just before each
    product. The conversion is exact, so the kernel still rounds where it does on
    a GPU (P is rounded to bf16 before P @ V); only the accumulation order differs.
    """
    if dtype == torch.float32:
        return DOT_IEEE_FP32 if KERNELS_INTERPRETED else FP32_DOT_MODE
    if dtype == torch.bfloat16 and KERNELS_INTERPRETED:
        return DOT_UPCAST_FP32
    return DOT_NATIVE


@triton.jit
def tile_dot(a, b, DOT_MODE: tl.constexpr):
    """``a @ b`` with fp32 accumulation; ``DOT_MODE`` is one of the ``DOT_*`` values."""
    if DOT_MODE == 1:
        return tl.dot(a, b, input_precision="ieee")
    elif DOT_MODE == 2:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    elif DOT_MODE == 3:
        return tl.dot(a, b, input_precision="tf32x3")
    else:
        return tl.dot(a, b)


@triton.jit
def bf16_ready(x, DOT_MODE: tl.constexpr):
    """fp32 ``x``, made ready for a conversion to the tile dtype.

    Triton 3.9's interpreter converts fp32 to bf16 by truncating the mantissa
    (2037 of 4096 randn values differ from torch's round-to-nearest-even), twice
    the rounding error of a GPU's conversion, enough to fail the accuracy rule of :mod:`flashattn2.testing`. So with
    ``DOT_MODE == DOT_UPCAST_FP32`` (bf16 under the interpreter) ``x`` is
    rounded here to the nearest bf16 value, ties to even (add 0x7FFF plus the
    lowest kept bit, then clear the 16 dropped bits; NaN kept as it is), and
    the truncating conversion that follows is exact. Otherwise ``x`` is
    returned unchanged.
    """
    if DOT_MODE == 2:
        bits = x.to(tl.uint32, bitcast=True)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).to(tl.float32, bitcast=True)
        return tl.where(x != x, x, rounded)
    else:
        return x


def head_dim_block(head_dim: int) -> int:
    """Head dimension rounded up to a power of two and at least 16 (tile shapes must be powers of two)."""
    return max(MIN_DOT_DIM, triton.next_power_of_2(head_dim))


# Above this length a head already has more tiles than an H100 has SMs (132) for
# every tile size tried, so longer sequences reuse the tuning of this bucket.
MAX_SEQ_BUCKET = 16384


def seq_len_bucket(n: int) -> int:
    """The sequence-length part of an autotuning key: the next power of two, at most
    ``MAX_SEQ_BUCKET``, so that each length does not trigger a new tuning run."""
    return min(triton.next_power_of_2(max(n, 1)), MAX_SEQ_BUCKET)


# Within one (batch, head) the kernels compute element offsets (row * row stride
# + column * column stride) in 32-bit integers, as Triton does for integer
# arguments below 2**31; batch and head offsets are converted to 64 bits. Past
# this limit an offset wraps around and a load reads the wrong address.
MAX_INT32 = 2**31 - 1


def needs_contiguous_copy(shape: tuple[int, ...], stride: tuple[int, ...], name: str) -> bool:
    """Whether a (B, H, N, D) tensor of this layout must be copied (made contiguous) for the kernels.

    A view with large row strides (a packed QKV buffer of a long sequence with
    many heads, say) can place its last row of a (batch, head) more than
    ``MAX_INT32`` elements past the first; its contiguous copy spans ``N * D``
    elements per (batch, head), which a 32-bit offset reaches up to N * D = 2**31.

    Raises:
        ValueError: even the contiguous layout is too large (``N * D > 2**31``).
    """
    n, d = shape[2], shape[3]
    if (n - 1) * stride[2] + (d - 1) * stride[3] <= MAX_INT32:  # the last element's offset
        return False
    if n * d - 1 > MAX_INT32:
        raise ValueError(
            f"flash_attention: {name} has {n} x {d} elements per (batch, head), more than the Triton kernels' "
            f"32-bit offsets reach (2**31); split the sequence, or use backend='pytorch'"
        )
    return True


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides of a contiguous tensor of ``shape``, in elements."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


@triton.jit
def load_tile(
    base,
    offs_rows,
    offs_d,
    stride_row,
    stride_d,
    n_rows,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    CHECK_ROWS: tl.constexpr,
):
    """Load a ``(len(offs_rows), BLOCK_D)`` tile whose row ``r`` starts at ``base + r * stride_row``.

    Padded columns (``d >= HEAD_DIM``) read as 0, and so do rows ``>= n_rows``
    when ``CHECK_ROWS``; tiles known to lie inside the sequence skip that mask.
    """
    ptrs = base + offs_rows[:, None] * stride_row + offs_d[None, :] * stride_d
    if CHECK_ROWS:
        return tl.load(ptrs, mask=(offs_rows[:, None] < n_rows) & (offs_d[None, :] < HEAD_DIM), other=0.0)
    elif HEAD_DIM < BLOCK_D:
        return tl.load(ptrs, mask=offs_d[None, :] < HEAD_DIM, other=0.0)
    else:
        return tl.load(ptrs)


@triton.jit
def key_ranges(m0, N_K, KV_SHIFT, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """Key ranges for the query rows ``[m0, m0 + BLOCK_M)``: ``(unmasked_end, end)``.

    Key tiles starting below ``unmasked_end`` (a multiple of ``BLOCK_N``) are
    complete and visible to every row, so they need no mask; tiles in
    ``[unmasked_end, end)`` cross the causal diagonal or the end of the keys and
    need masks; keys from ``end`` on are seen by no row and are skipped. Causal:
    query ``i`` sees keys ``j <= i + KV_SHIFT`` (``KV_SHIFT = Nk - Nq``).
    """
    if CAUSAL:
        unmasked_end = tl.maximum(tl.minimum(N_K, m0 + KV_SHIFT + 1), 0)
        end = tl.maximum(tl.minimum(N_K, m0 + BLOCK_M + KV_SHIFT), 0)
    else:
        unmasked_end = N_K
        end = N_K
    return (unmasked_end // BLOCK_N) * BLOCK_N, end


@triton.jit
def visible_keys(offs_m, offs_n, N_K, KV_SHIFT, CAUSAL: tl.constexpr):
    """Boolean ``(len(offs_m), len(offs_n))``: which of these keys each of these queries sees
    (keys past ``N_K`` never; causal: key ``j`` iff ``j <= i + KV_SHIFT``)."""
    visible = offs_n[None, :] < N_K
    if CAUSAL:
        visible = visible & (offs_n[None, :] <= offs_m[:, None] + KV_SHIFT)
    return visible


@triton.jit
def heaviest_first(pid, pairs, tiles, head_group):
    """Program ``pid`` of a causal launch (1-D grid of ``pairs * tiles`` programs) as ((batch, head) pair, rank):
    rank 0 is a pair's tile with the most work. Ranks ascend over the launch, ``head_group`` pairs at a time with
    their tiles interleaved, so that the launch ends on the lightest tiles."""
    first = pid // (head_group * tiles) * head_group
    size = tl.minimum(pairs - first, head_group)
    rest = pid - first * tiles
    return first + rest % size, rest // size
