"""FlashAttention-2 in plain PyTorch, tile by tile: the readable specification.

These two functions compute exactly what the Triton kernels compute, in the same
order of ideas, with Python loops over tiles instead of GPU programs. They run on
any device and are the ``"pytorch"`` backend of :func:`flashattn2.flash_attention`.

Shapes (``B`` batch, ``H`` query heads, ``Hkv`` k/v heads with ``H % Hkv == 0``,
``Nq`` queries, ``Nk`` keys, ``D`` head dim): q ``(B, H, Nq, D)``, k and v
``(B, Hkv, Nk, D)``. Query head ``h`` attends with k/v head ``h // (H // Hkv)``.
Causal masks are bottom-right aligned: query ``i`` sees key ``j`` iff
``j <= i + Nk - Nq``. A query that sees no key gets output 0 and logsumexp ``-inf``.

Arithmetic is fp32 whatever the input dtype (fp16/bf16/fp32); outputs are cast
back to the input dtype, except the logsumexp, which stays fp32.
"""

from __future__ import annotations

import torch

# Tile sizes (the paper's B_r x B_c). 64 x 64 keeps each step a few small
# batched matrix products; any positive sizes give the same result up to rounding.
DEFAULT_TILE_ROWS = 64
DEFAULT_TILE_COLS = 64


def _expand_kv_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, Hkv, N, D) -> (B, H, N, D): query head h reads k/v head h // (H // Hkv).

    ``Hkv == 0`` (validated inputs then have ``H == 0`` too) returns ``x``: there is no head to expand.
    """
    kv_heads = x.shape[1]
    group = heads // kv_heads if kv_heads else 1
    return x if group == 1 else x.repeat_interleave(group, dim=1)


def _visible(rows: range, cols: range, kv_shift: int, causal: bool, device) -> torch.Tensor | None:
    """Boolean (len(rows), len(cols)) mask of the keys each query sees, or None when all are visible."""
    if not causal or cols.stop - 1 <= rows.start + kv_shift:
        return None
    i = torch.arange(rows.start, rows.stop, device=device)[:, None]
    j = torch.arange(cols.start, cols.stop, device=device)[None, :]
    return j <= i + kv_shift


def _key_stop(rows: range, n_k: int, kv_shift: int, causal: bool) -> int:
    """One past the last key any query in ``rows`` sees (tiles from here on are skipped)."""
    return max(0, min(n_k, rows.stop + kv_shift)) if causal else n_k


def tiled_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    softmax_scale: float,
    tile_rows: int = DEFAULT_TILE_ROWS,
    tile_cols: int = DEFAULT_TILE_COLS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """FA2 forward (Algorithm 1): online softmax over key tiles, never forming an Nq x Nk matrix.

    Arguments:
        q: ``(B, H, Nq, D)``; k, v: ``(B, Hkv, Nk, D)``; fp16, bf16 or fp32.
        causal: bottom-right aligned causal mask.
        softmax_scale: multiplies ``q . k``.
        tile_rows, tile_cols: query and key rows per tile.

    Returns:
        ``(O, L)``: O ``(B, H, Nq, D)`` in q's dtype; L ``(B, H, Nq)`` float32, the
        natural-log logsumexp of each row of scaled scores.

    Example::

        >>> q, k, v = (torch.randn(1, 2, 10, 16) for _ in range(3))
        >>> o, lse = tiled_forward(q, k, v, causal=True, softmax_scale=0.25, tile_rows=4, tile_cols=4)
        >>> o.shape, lse.shape
        (torch.Size([1, 2, 10, 16]), torch.Size([1, 2, 10]))
    """
    heads, n_q, n_k = q.shape[1], q.shape[2], k.shape[2]
    k = _expand_kv_heads(k, heads)
    v = _expand_kv_heads(v, heads)
    kv_shift = n_k - n_q
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device)
    for r0 in range(0, n_q, tile_rows):
        rows = range(r0, min(r0 + tile_rows, n_q))
        q_tile = q[:, :, rows.start : rows.stop].float()
        row_max = torch.full(q_tile.shape[:-1], float("-inf"), device=q.device)  # m in the paper
        row_sum = torch.zeros(q_tile.shape[:-1], device=q.device)  # l
        acc = torch.zeros(q_tile.shape, device=q.device)  # unnormalized O
        for c0 in range(0, _key_stop(rows, n_k, kv_shift, causal), tile_cols):
            cols = range(c0, min(c0 + tile_cols, n_k))
            scores = q_tile @ k[:, :, cols.start : cols.stop].float().transpose(-1, -2) * softmax_scale
            visible = _visible(rows, cols, kv_shift, causal, q.device)
            if visible is not None:
                scores = scores.masked_fill(~visible, float("-inf"))
            new_max = torch.maximum(row_max, scores.amax(dim=-1))
            # Rows with no visible key so far keep max -inf; shift by 0 instead (exp(-inf) = 0, not nan).
            shift = torch.where(new_max == float("-inf"), 0.0, new_max)
            p = torch.exp(scores - shift[..., None])
            correction = torch.exp(row_max - shift)
            row_sum = row_sum * correction + p.sum(dim=-1)
            acc = acc * correction[..., None] + p @ v[:, :, cols.start : cols.stop].float()
            row_max = new_max
        seen = row_sum != 0  # NaN sums stay NaN below
        safe_sum = torch.where(seen, row_sum, 1.0)
        out[:, :, rows.start : rows.stop] = (acc / safe_sum[..., None]).to(q.dtype)
        lse[:, :, rows.start : rows.stop] = torch.where(seen, row_max + torch.log(safe_sum), float("-inf"))
    return out, lse


def tiled_backward(
    grad_out: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    causal: bool,
    softmax_scale: float,
    tile_rows: int = DEFAULT_TILE_ROWS,
    tile_cols: int = DEFAULT_TILE_COLS,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """FA2 backward (the gradients of Algorithm 2): recompute each probability tile from L.

    For every (query tile, key tile) pair that the mask does not skip, P is
    rebuilt as ``exp(scale * Q K^T - L)`` and its contributions are added to dQ,
    dK and dV; no Nq x Nk matrix is formed.

    Arguments:
        grad_out, out: ``(B, H, Nq, D)``; q, k, v as in :func:`tiled_forward`;
        lse: ``(B, H, Nq)`` float32 from :func:`tiled_forward`.

    Returns:
        ``(dq, dk, dv)`` with the shapes and dtypes of q, k, v (dk, dv summed over
        the query heads that share each k/v head).
    """
    heads, n_q, n_k = q.shape[1], q.shape[2], k.shape[2]
    kv_heads = k.shape[1]
    k_full = _expand_kv_heads(k, heads)
    v_full = _expand_kv_heads(v, heads)
    kv_shift = n_k - n_q
    delta = (grad_out.float() * out.float()).sum(dim=-1)  # (B, H, Nq): rowsum(dO * O)
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    dk = torch.zeros(k_full.shape, dtype=torch.float32, device=q.device)
    dv = torch.zeros(v_full.shape, dtype=torch.float32, device=q.device)
    for r0 in range(0, n_q, tile_rows):
        rows = range(r0, min(r0 + tile_rows, n_q))
        sl_r = slice(rows.start, rows.stop)
        q_tile, do_tile = q[:, :, sl_r].float(), grad_out[:, :, sl_r].float()
        lse_tile, delta_tile = lse[:, :, sl_r], delta[:, :, sl_r]
        for c0 in range(0, _key_stop(rows, n_k, kv_shift, causal), tile_cols):
            cols = range(c0, min(c0 + tile_cols, n_k))
            sl_c = slice(cols.start, cols.stop)
            k_tile, v_tile = k_full[:, :, sl_c].float(), v_full[:, :, sl_c].float()
            p = torch.exp(q_tile @ k_tile.transpose(-1, -2) * softmax_scale - lse_tile[..., None])
            visible = _visible(rows, cols, kv_shift, causal, q.device)
            if visible is not None:
                # where, not a product: p is +inf on rows whose L is -inf (rows that see no key).
                p = torch.where(visible, p, 0.0)
            dv[:, :, sl_c] += p.transpose(-1, -2) @ do_tile
            dp = do_tile @ v_tile.transpose(-1, -2)
            ds = p * (dp - delta_tile[..., None])
            dq[:, :, sl_r] += ds @ k_tile * softmax_scale
            dk[:, :, sl_c] += ds.transpose(-1, -2) @ q_tile * softmax_scale
    group = heads // kv_heads if kv_heads else 1
    dk = dk.unflatten(1, (kv_heads, group)).sum(dim=2)
    dv = dv.unflatten(1, (kv_heads, group)).sum(dim=2)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)
