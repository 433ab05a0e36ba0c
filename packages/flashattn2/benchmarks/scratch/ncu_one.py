"""Scratch: run forward+backward once per (B,H,N,D,causal,flags) spec, for ncu."""
import sys, torch
import flashattn2._triton_common as C
from flashattn2._triton_forward import forward_plan, triton_forward
from flashattn2._triton_backward import backward_plan, triton_backward
for spec in sys.argv[1:]:
    b, h, n, d, causal, flags = (int(x) for x in spec.split(","))
    C.EXPERIMENT = flags
    forward_plan.cache_clear(); backward_plan.cache_clear()
    q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    o, lse = triton_forward(q, k, v, bool(causal), d ** -0.5)
    triton_backward(g, q, k, v, o, lse, bool(causal), d ** -0.5)
    torch.cuda.synchronize()
