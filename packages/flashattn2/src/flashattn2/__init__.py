"""trainsys-flashattn2: FlashAttention-2 forward and backward in Triton, with a tiled PyTorch reference.

Public API:

- :func:`flash_attention`: the functional entry point (shapes, GQA, causal,
  backends, ``torch.compile``);
- :class:`FlashAttention2Triton`, :class:`FlashAttention2PyTorch`: the two
  ``torch.autograd.Function`` implementations, ``apply(q, k, v, is_causal)``;
- :class:`FlashSelfAttention`: a multi-head self-attention ``nn.Module`` built on it;
- :mod:`flashattn2.testing`: the float64 reference and the accuracy rule.
"""

from flashattn2.__about__ import __version__
from flashattn2.api import flash_attention
from flashattn2.autograd import FlashAttention2PyTorch, FlashAttention2Triton
from flashattn2.module import FlashSelfAttention

__all__ = [
    "FlashAttention2PyTorch",
    "FlashAttention2Triton",
    "FlashSelfAttention",
    "__version__",
    "flash_attention",
]
