"""Scratch: SM clock and power while forward+backward runs in a loop for 4 s each: flashattn2 and SDPA's cuDNN
backend, at the headline shape and (4, 16, 4096, 128) full; nvidia-smi samples every 50 ms."""
import json
import os
import subprocess
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashattn2 import flash_attention

log = os.path.join(os.environ.get("OUT", "."), "clocks.csv")
smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu",
                        "--format=csv,noheader,nounits", "-lms", "50"], stdout=open(log, "w"))
time.sleep(1)
spans = []
for shape, causal in (((1, 16, 16384, 64), True), ((4, 16, 4096, 128), False)):
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn(shape, device="cuda", dtype=torch.bfloat16)

    def ours():
        flash_attention(q, k, v, causal=causal).backward(g)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal).backward(g)

    for name, fn in (("ours", ours), ("cudnn", cudnn), ("ours", ours), ("cudnn", cudnn)):
        fn()
        torch.cuda.synchronize()
        t0 = time.time()
        calls = 0
        while time.time() - t0 < 4:
            for _ in range(10):
                fn()
            torch.cuda.synchronize()
            calls += 10
        t1 = time.time()
        spans.append({"shape": shape, "causal": causal, "name": name, "start": t0, "end": t1,
                      "ms_per_call": 1000 * (t1 - t0) / calls})
        print(spans[-1], flush=True)
        time.sleep(1)
smi.terminate()
json.dump(spans, open(os.path.join(os.environ.get("OUT", "."), "clock_spans.json"), "w"), indent=1)
