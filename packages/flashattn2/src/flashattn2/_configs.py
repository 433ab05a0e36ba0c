"""Tile configurations of the Triton kernels: the shipped defaults and the autotuning candidates.

A :class:`Tile` is what a kernel launch needs besides its arguments: the query
and key rows per program (``block_m``, ``block_n``), the warps per program and
the software-pipelining depth. :func:`default_tile` looks one up in a table of
configurations measured per (GPU generation, head-dim bucket, element size),
so that the first call of a new shape compiles one configuration per
kernel and runs, with no tuning. ``FLASHATTN2_AUTOTUNE=1`` makes the launchers
time :func:`candidate_tiles` on the call's own inputs instead (see
:mod:`flashattn2._launch`). The kernels: ``"forward"``, and the backward's
``"dq"`` and ``"dkdv"``, or ``"one_launch"`` (both in one launch, short sequences).
"""

from __future__ import annotations

import os
from typing import NamedTuple

import torch

from flashattn2._inputs import cuda_capability
from flashattn2._triton_common import KERNELS_INTERPRETED, head_dim_block


class Tile(NamedTuple):
    """One launch configuration: ``block_m`` query rows and ``block_n`` key rows per program."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


class TileKey(NamedTuple):
    """What a kernel's tile is chosen by: the head dim, dtype, mask, device and sequence-length bucket
    (``seq_len_bucket`` of the longer of queries and keys). A launcher's plan builds it once."""

    head_dim: int
    dtype: torch.dtype
    causal: bool
    device: torch.device
    seq_len: int


# Under the interpreter: 16x16 tiles, so that the tests' small sequences (N <= 40)
# still span several tiles, ragged last tiles and diagonal tiles.
INTERPRETER_TILE = Tile(16, 16, 4, 1)

# Head dimensions are bucketed by the padded width the kernels tile with (16 joins 32).
HEAD_DIM_BUCKETS = (32, 64, 128, 256)

# The defaults, per kernel, keyed by (head-dim bucket, bytes per element), for
# Hopper (compute capability 9.x): the fastest configuration of
# benchmarks/tiles.py on an H100 (BENCHMARKS.md) at (B, H, N) = (1, 16, 16384)
# for head dim 64, (4, 16, 4096) for 128 (causal and full gave the same
# optimum), (2, 16, 4096) for 256; bucket 32 uses 64's. fp32 keeps small tiles
# that compile fast: larger ones ran 5-15% faster at head dim 64 but took the
# first call's compilation past 10 s; fp32 at head dims 128 and 256 was not timed.
_HOPPER_DEFAULTS: dict[str, dict[tuple[int, int], Tile]] = {
    "forward": {
        (64, 2): Tile(128, 64, 8, 4),
        (128, 2): Tile(64, 64, 4, 3),
        (256, 2): Tile(64, 32, 4, 2),
        (64, 4): Tile(64, 64, 4, 2),
        (128, 4): Tile(64, 32, 4, 2),
        (256, 4): Tile(32, 32, 4, 1),
    },
    "dq": {
        (64, 2): Tile(128, 64, 8, 3),
        (128, 2): Tile(128, 64, 8, 3),
        (256, 2): Tile(64, 32, 4, 3),
        (64, 4): Tile(64, 32, 4, 1),
        (128, 4): Tile(64, 32, 4, 1),
        (256, 4): Tile(32, 16, 4, 1),
    },
    "dkdv": {
        (64, 2): Tile(64, 64, 4, 3),
        (128, 2): Tile(64, 64, 4, 2),
        (256, 2): Tile(64, 64, 8, 2),
        (64, 4): Tile(32, 64, 4, 1),
        (128, 4): Tile(32, 64, 4, 1),
        (256, 4): Tile(16, 32, 4, 1),
    },
}

# Hopper, causal forwards whose sequence-length bucket (the tuning key's, see
# ``seq_len_bucket``) is at most SHORT_CAUSAL_FORWARD_LEN, head dims up to 64,
# 2-byte elements: this tile instead of the table's. Replayed in CUDA graphs on
# an H100 it took 0.89-0.99x the table tile's time at eight head-dim-64 shapes
# from N = 256 to 1024 and 0.82x at head dim 32; at 2048 0.92-1.04x, and without
# the mask 1.02-1.05x (benchmarks/NOTES.md, v61).
SHORT_CAUSAL_FORWARD_LEN = 1024
SHORT_CAUSAL_FORWARD_TILE = Tile(64, 64, 4, 3)

# Hopper, causal backwards run as the dQ and dK/dV kernels whose sequence-length
# bucket is at most SHORT_CAUSAL_BACKWARD_LEN, head dims in
# SHORT_CAUSAL_BACKWARD_HEAD_DIMS (tiles 32 and 64 wide; narrower heads were not
# timed), 2-byte elements: these tiles instead of the table's, which were
# measured at 16384 keys. Replayed in CUDA graphs on an H200, the backward alone
# took 0.90-1.03x the table pair's time at six bf16 causal shapes of 256 to 1024
# keys at head dim 64 under Triton 3.6, and 0.78-1.05x under Triton 3.9, under
# which the backward with the table's 8-warp dQ tile runs 8-14% slower than
# under 3.6; at head dim 32 0.83-1.09x (3.6), in fp16 0.90-1.00x (3.6);
# gradients bitwise equal. At 2048 keys these tiles took 1.02x (3.6) and 0.96x
# (3.9), without the mask 1.14-1.20x, so those keep the table's
# (benchmarks/NOTES.md, v168, v169).
SHORT_CAUSAL_BACKWARD_LEN = 1024
SHORT_CAUSAL_BACKWARD_HEAD_DIMS = range(17, 65)
SHORT_CAUSAL_BACKWARD_TILES = {"dq": Tile(64, 32, 4, 3), "dkdv": Tile(32, 64, 4, 3)}

# Kernels whose tiles are another kernel's: the one-launch backward's dQ and dK/dV
# programs both take the dK/dV kernel's tile (the short-causal rules above are not its own).
TILES_OF = {"one_launch": "dkdv"}

# Other GPUs (Ampere, Ada, Blackwell...): small tiles that fit the 99 KB of shared
# memory a block may use on consumer parts (CUDA C++ Programming Guide, compute
# capability 8.6/8.9), not tuned.
_PORTABLE_DEFAULTS: dict[str, dict[int, Tile]] = {
    "forward": {32: Tile(64, 64, 4, 2), 64: Tile(64, 64, 4, 2), 128: Tile(64, 32, 4, 2), 256: Tile(32, 32, 4, 1)},
    "dq": {32: Tile(64, 32, 4, 2), 64: Tile(64, 32, 4, 2), 128: Tile(64, 32, 4, 1), 256: Tile(32, 16, 4, 1)},
    "dkdv": {32: Tile(32, 64, 4, 1), 64: Tile(32, 64, 4, 1), 128: Tile(32, 32, 4, 1), 256: Tile(16, 32, 4, 1)},
}

# Candidates timed with FLASHATTN2_AUTOTUNE=1. They follow the Triton
# fused-attention tutorial's search space: BLOCK_M 64/128 with BLOCK_N 32..128
# for programs that keep a query tile (forward, dQ); dK/dV programs keep a key
# tile and stream query tiles, the tutorial's backward split 32x128 the other way.
# 8-warp variants of the small tiles serve wide heads (D = 256), whose fp32
# accumulators spill registers at 4 warps.
_CANDIDATES: dict[str, list[Tile]] = {
    "forward": [
        Tile(128, 64, 8, 4),
        Tile(128, 64, 8, 3),
        Tile(128, 64, 4, 3),
        Tile(128, 128, 8, 3),
        Tile(128, 128, 8, 2),
        Tile(128, 32, 4, 3),
        Tile(64, 64, 4, 3),
        Tile(64, 64, 4, 2),
        Tile(64, 32, 4, 2),
        Tile(64, 64, 8, 2),
        Tile(64, 32, 8, 2),
        Tile(32, 32, 4, 1),
    ],
    "dq": [
        Tile(128, 64, 8, 3),
        Tile(128, 32, 4, 3),
        Tile(128, 64, 8, 2),
        Tile(64, 64, 4, 3),
        Tile(64, 64, 4, 2),
        Tile(64, 32, 4, 3),
        Tile(64, 32, 4, 2),
        Tile(64, 32, 4, 1),
        Tile(64, 64, 8, 2),
        Tile(64, 32, 8, 2),
        Tile(32, 32, 8, 2),
        Tile(32, 16, 4, 1),
    ],
    "dkdv": [
        Tile(64, 64, 4, 2),
        Tile(64, 64, 4, 3),
        Tile(32, 128, 4, 3),
        Tile(64, 128, 8, 3),
        Tile(128, 128, 8, 2),
        Tile(32, 64, 4, 3),
        Tile(32, 64, 4, 1),
        Tile(64, 64, 8, 2),
        Tile(32, 64, 8, 2),
        Tile(32, 32, 8, 2),
        Tile(16, 64, 4, 2),
        Tile(16, 32, 4, 1),
    ],
}


def autotuning() -> bool:
    """True when ``FLASHATTN2_AUTOTUNE=1``: time the candidates for each new key instead of using the table."""
    return os.environ.get("FLASHATTN2_AUTOTUNE", "0") == "1"


def head_dim_bucket(head_dim: int) -> int:
    """The table's head-dim bucket: the padded tile width, at least 32."""
    return max(HEAD_DIM_BUCKETS[0], head_dim_block(head_dim))


def shared_memory_bytes(kernel: str, tile: Tile, block_d: int, element_size: int) -> int:
    """Shared memory a program of ``kernel`` needs with ``tile``, counted in tile rows.

    The forward keeps its Q tile and streams one K and one V tile per pipeline
    stage; dQ keeps Q and dO and streams K and V; dK/dV keeps K and V and streams
    Q and dO. Triton's own scratch (layout conversions, barriers) is not counted:
    callers keep a margin.
    """
    resident, streamed = {
        "forward": (tile.block_m, 2 * tile.block_n),
        "dq": (2 * tile.block_m, 2 * tile.block_n),
        "dkdv": (2 * tile.block_n, 2 * tile.block_m),
    }[kernel]
    return block_d * element_size * (resident + streamed * max(tile.num_stages, 1))


# The part of a block's shared memory left to our tiles: Triton's scratch takes
# the rest (the H100 runs showed layout-conversion buffers of a few tens of KB).
SHARED_MEMORY_MARGIN = 0.85

_max_shared_memory: dict[int, int] = {}


def max_shared_memory(device: torch.device) -> int:
    """Bytes of shared memory one block may use on ``device`` (queried once per device)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _max_shared_memory:
        from triton.runtime import driver

        _max_shared_memory[index] = driver.active.utils.get_device_properties(index)["max_shared_mem"]
    return _max_shared_memory[index]


def fits(kernel: str, tile: Tile, block_d: int, element_size: int, device: torch.device) -> bool:
    """Whether ``tile`` of ``kernel`` fits in ``device``'s shared memory, with the margin."""
    needed = shared_memory_bytes(kernel, tile, block_d, element_size)
    return needed <= SHARED_MEMORY_MARGIN * max_shared_memory(device)


def default_tile(
    kernel: str,
    head_dim: int,
    dtype: torch.dtype,
    device: torch.device,
    *,
    causal: bool = False,
    seq_len: int | None = None,
) -> Tile:
    """The shipped configuration of ``kernel`` (``"forward"``, ``"dq"``, ``"dkdv"`` or ``"one_launch"``) for
    these inputs. ``seq_len``: the tuning key's sequence-length bucket; on Hopper the tiles of the forward and of
    the dQ and dK/dV kernels depend on it and on ``causal`` (:data:`SHORT_CAUSAL_FORWARD_LEN`,
    :data:`SHORT_CAUSAL_BACKWARD_LEN`)."""
    if KERNELS_INTERPRETED:
        return INTERPRETER_TILE
    bucket = head_dim_bucket(head_dim)
    table = TILES_OF.get(kernel, kernel)
    if cuda_capability(device)[0] != 9:
        return _PORTABLE_DEFAULTS[table][bucket]
    short_causal = causal and seq_len is not None and dtype.itemsize == 2
    if short_causal and kernel == "forward" and seq_len <= SHORT_CAUSAL_FORWARD_LEN and bucket <= 64:
        return SHORT_CAUSAL_FORWARD_TILE
    if (
        short_causal
        and kernel in SHORT_CAUSAL_BACKWARD_TILES
        and seq_len <= SHORT_CAUSAL_BACKWARD_LEN
        and head_dim in SHORT_CAUSAL_BACKWARD_HEAD_DIMS
    ):
        return SHORT_CAUSAL_BACKWARD_TILES[kernel]
    return _HOPPER_DEFAULTS[table][(max(bucket, 64), dtype.itemsize)]


def candidate_tiles(kernel: str, head_dim: int, dtype: torch.dtype, device: torch.device) -> list[Tile]:
    """The configurations ``FLASHATTN2_AUTOTUNE=1`` times: the candidates that fit ``device``."""
    if KERNELS_INTERPRETED:
        return [INTERPRETER_TILE]
    block_d = head_dim_block(head_dim)
    table = TILES_OF.get(kernel, kernel)
    return [t for t in _CANDIDATES[table] if fits(table, t, block_d, dtype.itemsize, device)]
