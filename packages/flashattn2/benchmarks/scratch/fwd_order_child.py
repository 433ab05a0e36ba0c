"""scratch (v134) child: GPU time (CUDA-graph replays) of the forward and forward+backward at short causal shapes."""

import json
import sys

import torch
import triton

from flashattn2 import flash_attention

out = {}
for shape in json.loads(sys.argv[1]):
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn_like(q)

    def fwd():
        with torch.no_grad():
            return flash_attention(q, k, v, causal=True)

    def fwd_bwd():
        torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), g)

    o = fwd()
    out[str(shape)] = {
        "fwd": triton.testing.do_bench_cudagraph(fwd, rep=60, return_mode="median"),
        "fwd_bwd": triton.testing.do_bench_cudagraph(fwd_bwd, rep=60, return_mode="median"),
        "o_sum": o.float().sum().item(),
    }
print(json.dumps(out))
