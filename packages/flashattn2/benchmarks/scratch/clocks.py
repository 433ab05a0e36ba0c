"""scratch (session 39): SM clock and board power while flashattn2 and SDPA's cuDNN backend loop at the headline
shape (1, 16, 16384, 64) causal bf16, forward+backward and forward alone, 3 s a span, alternating; nvidia-smi
samples every 50 ms. Prints each span's calls per second with its median clock and power."""
import json
import os
import statistics
import subprocess
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashattn2 import flash_attention

out = os.environ.get("OUT", ".")
log = os.path.join(out, "clocks.csv")
smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu",
                        "--format=csv,noheader,nounits", "-lms", "50"], stdout=open(log, "w"))
time.sleep(1)
shape = (1, 16, 16384, 64)
q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
g = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
qd, kd, vd = (t.detach() for t in (q, k, v))


def ours_fb():
    torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), g)


def cudnn_fb():
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), g)


def ours_f():
    flash_attention(qd, kd, vd, causal=True)


def cudnn_f():
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        F.scaled_dot_product_attention(qd, kd, vd, is_causal=True)


spans = []
for name, fn in [("ours fwd+bwd", ours_fb), ("cudnn fwd+bwd", cudnn_fb)] * 2 + [("ours fwd", ours_f), ("cudnn fwd", cudnn_f)] * 2:
    fn()
    torch.cuda.synchronize()
    t0 = time.time()
    calls = 0
    while time.time() - t0 < 3:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
        calls += 10
    t1 = time.time()
    spans.append({"name": name, "start": t0, "end": t1, "ms_per_call": 1000 * (t1 - t0) / calls})
    time.sleep(1)
smi.terminate()
time.sleep(0.5)
rows = []
for line in open(log):
    parts = [p.strip() for p in line.split(",")]
    try:
        stamp = time.mktime(time.strptime(parts[0].split(".")[0], "%Y/%m/%d %H:%M:%S")) + float("0." + parts[0].split(".")[1])
        rows.append((stamp, float(parts[1]), float(parts[2])))
    except (ValueError, IndexError):
        continue
offset = 0.0  # nvidia-smi prints local time; the machine runs UTC
for s in spans:
    inside = [r for r in rows if s["start"] + 0.5 <= r[0] + offset <= s["end"]]
    s["samples"] = len(inside)
    s["sm_mhz"] = statistics.median(r[1] for r in inside) if inside else None
    s["watts"] = statistics.median(r[2] for r in inside) if inside else None
    print(f"{s['name']:14s} {s['ms_per_call']:.3f} ms/call  SM {s['sm_mhz']} MHz  {s['watts']} W  ({s['samples']} samples)")
json.dump(spans, open(os.path.join(out, "clock_spans.json"), "w"), indent=1)
