"""The reference Transformer language model that every benchkit measurement runs on.

A decoder-only Transformer LM: token embedding; ``num_layers`` pre-norm blocks
``x + MHA(RMSNorm(x))`` then ``x + SwiGLU(RMSNorm(x))``; a final RMSNorm; an
untied linear LM head. Attention is causal multi-head self-attention with rotary
position embeddings (RoPE, Su et al. 2021, "RoFormer", eq. 34) applied to queries
and keys; the feed-forward is SwiGLU ``W2(SiLU(W1 x) * W3 x)`` (Shazeer 2020, "GLU
Variants Improve Transformer"). No biases, no dropout.

The attention backend is chosen per model:

- ``"naive"``: the textbook formula, materializing the (T, T) score matrix;
- ``"sdpa"``: :func:`torch.nn.functional.scaled_dot_product_attention`;
- ``"flashattn2"``: this repository's FlashAttention-2 kernel, imported only when
  a model asks for it.

Example::

    import torch
    from benchkit.model import TransformerLM, lm_loss, model_config, parameter_count, random_batch

    config = model_config("tiny", context_length=32)
    model = TransformerLM(config)
    assert sum(p.numel() for p in model.parameters()) == parameter_count(config)
    inputs, targets = random_batch(config, batch_size=2)
    logits = model(inputs)  # (2, 32, 10000) float32
    lm_loss(logits, targets).backward()
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "ATTENTION_BACKENDS",
    "SIZES",
    "ModelConfig",
    "TransformerLM",
    "attention_function",
    "lm_loss",
    "model_config",
    "parameter_count",
    "random_batch",
]

ATTENTION_BACKENDS = ("naive", "sdpa", "flashattn2")

# Named sizes: the GPT-2 small/medium/large/xl shapes (Radford et al. 2019) and a 2.7B
# model, plus "tiny", which trains in seconds on a CPU.
SIZES: dict[str, dict[str, int]] = {
    "tiny": dict(d_model=64, d_ff=256, num_layers=2, num_heads=4),
    "small": dict(d_model=768, d_ff=3072, num_layers=12, num_heads=12),
    "medium": dict(d_model=1024, d_ff=4096, num_layers=24, num_heads=16),
    "large": dict(d_model=1280, d_ff=5120, num_layers=36, num_heads=20),
    "xl": dict(d_model=1600, d_ff=6400, num_layers=48, num_heads=25),
    "2.7B": dict(d_model=2560, d_ff=10240, num_layers=32, num_heads=32),
}

# RMSNorm's epsilon, added to the mean square before the square root; 1e-5 is the
# value used by LLaMA (Touvron et al. 2023) for the same pre-norm layout.
RMSNORM_EPS = 1e-5


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Shape of a :class:`TransformerLM`.

    Attributes:
        vocab_size: number of token ids; inputs lie in ``[0, vocab_size)``.
        context_length: longest sequence the model accepts (RoPE tables are
            precomputed up to it).
        d_model: width of the residual stream.
        d_ff: hidden width of the SwiGLU feed-forward.
        num_layers: number of Transformer blocks.
        num_heads: attention heads; ``d_model`` must be divisible by it and the
            head dimension ``d_model // num_heads`` must be even (RoPE rotates pairs).
        rope_theta: RoPE base period.
        attention: ``"naive"``, ``"sdpa"`` or ``"flashattn2"``.
    """

    vocab_size: int = 10000
    context_length: int
    d_model: int
    d_ff: int
    num_layers: int
    num_heads: int
    rope_theta: float = 10000.0
    attention: str = "sdpa"

    def __post_init__(self) -> None:
        for name in ("vocab_size", "context_length", "d_model", "d_ff", "num_layers", "num_heads"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ModelConfig.{name} must be a positive int, got {value!r}")
        if self.d_model % self.num_heads:
            raise ValueError(f"ModelConfig.d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads})")
        if self.head_dim % 2:
            raise ValueError(
                f"ModelConfig head dimension d_model // num_heads must be even for RoPE, got {self.head_dim}"
            )
        if self.rope_theta <= 0:
            raise ValueError(f"ModelConfig.rope_theta must be > 0, got {self.rope_theta!r}")
        if self.attention not in ATTENTION_BACKENDS:
            raise ValueError(f"ModelConfig.attention must be one of {ATTENTION_BACKENDS}, got {self.attention!r}")

    @property
    def head_dim(self) -> int:
        """Width of one attention head, ``d_model // num_heads``."""
        return self.d_model // self.num_heads


def model_config(size: str, context_length: int, attention: str = "sdpa") -> ModelConfig:
    """The :class:`ModelConfig` of a named size (a key of :data:`SIZES`), vocabulary 10000."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {list(SIZES)}, got {size!r}")
    return ModelConfig(context_length=context_length, attention=attention, **SIZES[size])


def parameter_count(config: ModelConfig) -> int:
    """Number of trainable parameters of ``TransformerLM(config)``, in closed form.

    With V = vocab_size, d = d_model, f = d_ff and L = num_layers:
    ``V*d`` (embedding) ``+ L*(4*d*d + 3*d*f + 2*d)`` (Q, K, V, output projections;
    W1, W2, W3; two RMSNorm gains) ``+ d`` (final RMSNorm) ``+ d*V`` (LM head, untied).
    """
    d, f, vocab = config.d_model, config.d_ff, config.vocab_size
    per_layer = 4 * d * d + 3 * d * f + 2 * d
    return vocab * d + config.num_layers * per_layer + d + d * vocab


def random_batch(
    config: ModelConfig,
    batch_size: int,
    *,
    device: torch.device | str = "cpu",
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Uniformly random next-token data: ``(inputs, targets)``, both int64 (each its own contiguous storage)
    of shape (batch_size, context_length), ``targets`` being ``inputs`` shifted left by one."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    tokens = torch.randint(0, config.vocab_size, (batch_size, config.context_length + 1), generator=generator).to(
        device
    )
    return tokens[:, :-1].clone(), tokens[:, 1:].clone()  # two storages of their own


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy (nats per token) of ``logits`` (B, T, V) against ``targets``
    (B, T) int64; computed in float32 whatever the logits' dtype."""
    if logits.dim() != 3 or targets.shape != logits.shape[:2]:
        raise ValueError(
            f"lm_loss expects logits (B, T, V) and targets (B, T), got {tuple(logits.shape)} and {tuple(targets.shape)}"
        )
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


def _rope_tables(config: ModelConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotation angles, float32 (context_length, head_dim // 2)."""
    half = config.head_dim // 2
    inv_freq = config.rope_theta ** (-torch.arange(half, dtype=torch.float64) / half)
    angles = torch.outer(torch.arange(config.context_length, dtype=torch.float64), inv_freq)
    return angles.cos().float(), angles.sin().float()


def _apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate consecutive pairs of ``x`` (B, H, T, Dh) by the angles of positions 0..T-1."""
    seq_len = x.shape[-2]
    cos, sin = cos[:seq_len], sin[:seq_len]
    even, odd = x[..., 0::2], x[..., 1::2]  # promoted to the tables' float32 (or float64)
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rotated.flatten(-2).type_as(x)


def _naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal softmax(q k^T / sqrt(Dh)) v on (B, H, T, Dh), materializing the (T, T) scores."""
    seq_len = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    future = torch.ones(seq_len, seq_len, dtype=torch.bool, device=q.device).triu(1)
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return weights.to(v.dtype) @ v


def _sdpa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def attention_function(backend: str) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    """The causal attention the model uses for ``backend`` (one of ``ATTENTION_BACKENDS``).

    The returned function maps q, k, v of shape (B, H, T, Dh) to the output of the
    same shape and dtype; ``benchkit attention`` times these same functions.
    """
    if backend == "naive":
        return _naive_attention
    if backend == "sdpa":
        return _sdpa_attention
    from flashattn2 import flash_attention  # lazy: only models that use it need Triton

    def flashattn2_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return flash_attention(q, k, v, causal=True)

    return flashattn2_attention


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with RoPE on queries and keys; (B, T, d) -> (B, T, d)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.num_heads = config.num_heads
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.out = nn.Linear(config.d_model, config.d_model, bias=False)
        self.attend = attention_function(config.attention)
        cos, sin = _rope_tables(config)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq_len, d_model = x.shape
        qkv = self.qkv(x).view(batch, seq_len, 3, self.num_heads, d_model // self.num_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (B, H, T, Dh)
        q = _apply_rope(q, self.rope_cos, self.rope_sin)
        k = _apply_rope(k, self.rope_cos, self.rope_sin)
        y = self.attend(q, k, v)  # (B, H, T, Dh)
        return self.out(y.transpose(1, 2).reshape(batch, seq_len, d_model))


class SwiGLU(nn.Module):
    """``W2(SiLU(W1 x) * W3 x)``; (B, T, d_model) -> (B, T, d_model) through width d_ff."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    """Pre-norm block: ``x + MHA(RMSNorm(x))`` then ``x + SwiGLU(RMSNorm(x))``."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.attn_norm = nn.RMSNorm(config.d_model, eps=RMSNORM_EPS)
        self.attn = CausalSelfAttention(config)
        self.ffn_norm = nn.RMSNorm(config.d_model, eps=RMSNORM_EPS)
        self.ffn = SwiGLU(config.d_model, config.d_ff)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x))
        return x + self.ffn(self.ffn_norm(x))


class TransformerLM(nn.Module):
    """Decoder-only Transformer language model (see the module docstring).

    Arguments:
        config: the model's shape and attention backend.

    ``forward(token_ids)`` takes int64 token ids of shape (B, T) with
    T <= ``config.context_length`` and returns logits of shape (B, T, vocab_size)
    in the parameters' dtype (float32 unless converted; lower under autocast).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(TransformerBlock(config) for _ in range(config.num_layers))
        self.final_norm = nn.RMSNorm(config.d_model, eps=RMSNORM_EPS)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        if token_ids.dim() != 2 or token_ids.dtype != torch.long:
            raise TypeError(
                f"token_ids must be an int64 tensor of shape (B, T), got {token_ids.dtype} "
                f"of shape {tuple(token_ids.shape)}"
            )
        if token_ids.shape[1] > self.config.context_length:
            raise ValueError(
                f"token_ids has T={token_ids.shape[1]} positions, more than context_length={self.config.context_length}"
            )
        x = self.embedding(token_ids)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.final_norm(x))
