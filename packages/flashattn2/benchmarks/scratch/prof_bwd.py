"""Kernel times of the package's backward (prologue, Hopper kernel, epilogue) at a few shapes, by torch.profiler."""
import json
import os

import torch

import flashattn2

rows = []
for b, h, n, d, causal in [(1, 16, 16384, 64, True), (4, 16, 4096, 128, True), (4, 16, 4096, 128, False)]:
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        flashattn2.flash_attention(q, k, v, causal=causal).backward(g)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            flashattn2.flash_attention(q, k, v, causal=causal).backward(g)
        torch.cuda.synchronize()
    times = {}
    for e in prof.key_averages():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.count:
            times[e.key[:60]] = (e.count, e.device_time_total / e.count / 1000)
    row = {"shape": (b, h, n, d), "causal": causal, "kernels_ms": times}
    print(json.dumps(row), flush=True)
    rows.append(row)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "prof_bwd.json"), "w"), indent=1)
