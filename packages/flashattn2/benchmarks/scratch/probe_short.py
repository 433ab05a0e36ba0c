"""scratch (v153): does the Hopper backward, forced below its thresholds, stop with an illegal instruction at other
short lengths than 385? python probe_short.py N HEAD_DIM CAUSAL(0/1) [BATCH HEADS]"""
import sys

import torch

from flashattn2 import flash_attention
from flashattn2._hopper import below_thresholds

n, d, causal = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
b, h = (int(sys.argv[4]), int(sys.argv[5])) if len(sys.argv) > 5 else (1, 2)
with below_thresholds():
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    flash_attention(q, k, v, causal=causal).sum().backward()
    torch.cuda.synchronize()
print("ok", n, d, causal, b, h, flush=True)
