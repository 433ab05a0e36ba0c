"""Scratch: SM clock and board power while the forward alone runs in a loop for 3 s: the package and cuDNN at
(4, 16, 4096, 128) full and the headline; nvidia-smi samples every 50 ms; medians of the middle of each span."""
import csv
import datetime
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
log = os.path.join(out, "clocks_fwd.csv")
smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu",
                        "--format=csv,noheader,nounits", "-lms", "50"], stdout=open(log, "w"))
time.sleep(1)
spans = []
for shape, causal in (((4, 16, 4096, 128), False), ((1, 16, 16384, 64), True)):
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))

    def ours():
        flash_attention(q, k, v, causal=causal)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    for name, fn in (("ours", ours), ("cudnn", cudnn), ("ours", ours), ("cudnn", cudnn)):
        fn()
        torch.cuda.synchronize()
        t0, calls = time.time(), 0
        while time.time() - t0 < 3:
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
            calls += 20
        t1 = time.time()
        spans.append({"shape": shape, "causal": causal, "name": name, "start": t0, "end": t1, "ms_per_call": 1000 * (t1 - t0) / calls})
        time.sleep(1)
smi.terminate()
time.sleep(0.5)
samples = []
for r in csv.reader(open(log)):
    try:
        samples.append((datetime.datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp(), float(r[1]), float(r[2]), float(r[3])))
    except (ValueError, IndexError):
        pass
for s in spans:
    inside = [x for x in samples if s["start"] + 0.5 < x[0] < s["end"] - 0.5]
    s.update(clock=statistics.median(x[1] for x in inside), power=statistics.median(x[2] for x in inside), n=len(inside))
    print(s["shape"], s["causal"], s["name"], f"{s['ms_per_call']:.3f} ms/call clock {s['clock']:.0f} MHz power {s['power']:.0f} W ({s['n']} samples)", flush=True)
json.dump(spans, open(os.path.join(out, "clocks_fwd.json"), "w"), indent=1)
