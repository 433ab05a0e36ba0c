"""One forward (+ backward) of flashattn2 and of SDPA's cuDNN backend, for ncu to profile their kernels:
python ncu_pass.py B H N D causal|full fwd|fwdbwd"""

import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashattn2 import flash_attention

b, h, n, d = map(int, sys.argv[1:5])
causal, backward = sys.argv[5] == "causal", sys.argv[6] == "fwdbwd"
q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, requires_grad=backward) for _ in range(3))
g = torch.randn_like(q)
for fn in (lambda: flash_attention(q, k, v, causal=causal), lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)):
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        o = fn()
        if backward:
            torch.autograd.grad(o, (q, k, v), g)
torch.cuda.synchronize()
