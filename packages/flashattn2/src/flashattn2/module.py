"""``FlashSelfAttention``: multi-head (optionally grouped-query) self-attention on :func:`flash_attention`."""

from __future__ import annotations

import torch
from torch import nn

from flashattn2.api import flash_attention


class FlashSelfAttention(nn.Module):
    """Multi-head self-attention: one fused QKV projection, FlashAttention-2, an output projection.

    Arguments:
        embed_dim: model width ``E``; must be divisible by ``num_heads``.
        num_heads: query heads ``H``; head dim ``D = E / H`` (1..256).
        num_kv_heads: k/v heads (grouped-query attention); must divide
            ``num_heads``; default ``num_heads``.
        causal: causal mask (each position sees itself and earlier positions).
        bias: whether the projections have biases.
        backend: passed to :func:`flash_attention`.

    Shapes: input ``(B, N, E)`` -> output ``(B, N, E)``, in the module's dtype.

    Example::

        >>> import torch
        >>> from flashattn2 import FlashSelfAttention
        >>> attn = FlashSelfAttention(embed_dim=64, num_heads=4, num_kv_heads=2, causal=True)
        >>> attn(torch.randn(2, 10, 64)).shape
        torch.Size([2, 10, 64])
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        num_kv_heads: int | None = None,
        *,
        causal: bool = False,
        bias: bool = False,
        backend: str = "auto",
    ) -> None:
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if num_heads < 1 or embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be a positive multiple of num_heads ({num_heads})")
        if num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError(f"num_kv_heads ({num_kv_heads}) must divide num_heads ({num_heads})")
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = embed_dim // num_heads
        self.causal = causal
        self.backend = backend
        self.qkv = nn.Linear(embed_dim, (num_heads + 2 * num_kv_heads) * self.head_dim, bias=bias)
        self.out = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, n, _ = x.shape
        qkv = self.qkv(x).view(batch, n, self.num_heads + 2 * self.num_kv_heads, self.head_dim)
        # Views of the packed projection, (B, heads, N, D) with strides: no copies.
        q, k, v = qkv.transpose(1, 2).split([self.num_heads, self.num_kv_heads, self.num_kv_heads], dim=1)
        o = flash_attention(q, k, v, causal=self.causal, backend=self.backend)
        return self.out(o.transpose(1, 2).reshape(batch, n, -1))
