"""scratch (v154): does the Hopper backward without its length rule stop at lengths its thresholds admit?
python probe_length.py N HEAD_DIM CAUSAL(0/1) BATCH HEADS"""

import sys

import torch

from flashattn2 import _gluon_backward, flash_attention

_gluon_backward.LENGTH_MULTIPLE = 1  # the rule off
n, d, causal, b, h = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4]), int(sys.argv[5])
q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
flash_attention(q, k, v, causal=causal).sum().backward()
torch.cuda.synchronize()
print("ok", n, d, causal, b, h, flush=True)
