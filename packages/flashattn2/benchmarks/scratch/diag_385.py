"""scratch (v150): which kernel fails at (1, 2, 385, 64) causal with scale -0.3 under below_thresholds:
python diag_385.py forward|backward THREE(0/1) SCALE"""
import sys

import torch

import flashattn2._gluon_forward as gf
import flashattn2._triton_forward as forward
from flashattn2 import flash_attention
from flashattn2._hopper import below_thresholds

what, three, scale = sys.argv[1], sys.argv[2] == "1", float(sys.argv[3])
n = int(sys.argv[4]) if len(sys.argv) > 4 else 385
if three:
    gf.THREE_CONSUMER_THRESHOLDS = {True: ((0, 0),), False: ((0, 0),)}
else:
    gf.THREE_CONSUMER_THRESHOLDS = {True: ((1 << 40, 0),), False: ((1 << 40, 0),)}
with below_thresholds():
    q, k, v = (torch.randn(1, 2, n, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    plan = forward.plan_for(q, k, v, True, scale)
    print("three consumers", plan.hopper is not None and plan.hopper.three_consumers, flush=True)
    if what == "forward":
        with torch.no_grad():
            out = forward.triton_forward(q, k, v, True, scale)
    else:
        out = flash_attention(q, k, v, causal=True, softmax_scale=scale)
        out.sum().backward()
    torch.cuda.synchronize()
    print(what, three, scale, n, "ok", flush=True)
