"""One forward of flashattn2 and of SDPA's cuDNN backend at (2, 16, 4096, 256) bf16 (argv[1]: causal or full), for
ncu to profile the two forward kernels: ncu -k 'regex:hopper_forward|fprop' ... python ncu_fwd_d256.py full"""

import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashattn2 import flash_attention

causal = sys.argv[1] == "causal"
q, k, v = (torch.randn(2, 16, 4096, 256, device="cuda", dtype=torch.bfloat16) for _ in range(3))
flash_attention(q, k, v, causal=causal)
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    F.scaled_dot_product_attention(q, k, v, is_causal=causal)
torch.cuda.synchronize()
