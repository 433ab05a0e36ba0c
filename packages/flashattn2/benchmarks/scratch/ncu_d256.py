"""One forward+backward of flashattn2 and of SDPA's cuDNN backend at (B, H, N, D) = (2, 16, 4096, 256) or the shape given,
bf16 (MASK: causal or full), for ncu to profile the two backward kernels:
ncu -k 'regex:hopper_backward|bprop' ... python ncu_d256.py causal [B H N D]"""

import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashattn2 import flash_attention

causal = sys.argv[1] == "causal"
shape = [int(x) for x in sys.argv[2:]] or [2, 16, 4096, 256]
q, k, v, g = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(4))
flash_attention(q, k, v, causal=causal).backward(g)
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    F.scaled_dot_product_attention(q, k, v, is_causal=causal).backward(g)
torch.cuda.synchronize()
