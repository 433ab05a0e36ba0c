"""Does the package's Hopper backward (gb_head) run at (1, 2, 130, 128) full, a shape below its dispatch threshold?"""
import os, sys
sys.path.insert(0, os.path.dirname(__file__))
import torch
import gb_head
from flashattn2._triton_forward import triton_forward
for n, causal in ((130, False), (130, True), (200, False), (260, False), (2100, False)):
    q, k, v, g = (torch.randn(1, 2, n, 128, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    out, lse = triton_forward(q, k, v, causal, 128**-0.5)
    hb = gb_head.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, 128**-0.5)
    grads = [torch.empty_like(x) for x in (q, k, v)]
    hb(g, q, k, v, out, lse, *grads)
    torch.cuda.synchronize()
    print(n, causal, "ok", flush=True)
