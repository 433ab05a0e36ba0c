"""Scratch: forward+backward of flashattn2 and of SDPA's cuDNN backend at (4, 16, 4096, 128) non-causal, twice each,
for ncu (profile the second round)."""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashattn2 import flash_attention

torch.manual_seed(0)
q, k, v = (torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
do = torch.randn_like(q)
for _ in range(2):
    flash_attention(q, k, v).backward(do)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        F.scaled_dot_product_attention(q, k, v).backward(do)
torch.cuda.synchronize()
