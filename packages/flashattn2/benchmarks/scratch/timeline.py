"""Scratch (v113): the GPU timeline of eager forward+backward calls, by torch.profiler.

    python timeline.py on|off '[1,16,16,2048,128,true]' flashattn2|cudnn $OUT/tag

Five calls after twenty warm-up calls, each after a 256 MB cache clear as do_bench makes; prints, for the last
two calls, every kernel and every launch call on the host (µs from the first call's start), and writes the
Chrome trace."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import matrix  # noqa: E402
import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from flashattn2 import _launch  # noqa: E402

if sys.argv[1] == "off":
    plain = _launch.CompiledLaunch.__init__

    def without_pdl(self, *args, launch_pdl=False, **kwargs):
        plain(self, *args, launch_pdl=False, **kwargs)

    _launch.CompiledLaunch.__init__ = without_pdl
shape = tuple(json.loads(sys.argv[2]))
name, prefix = sys.argv[3], sys.argv[4]
fn, ctx = matrix.implementations()[name]
q, k, v, g = matrix.inputs(shape)
call = matrix.passes(fn, ctx, q, k, v, g, shape[-1])["fwd_bwd_ms"]
cache = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")
for _ in range(20):
    cache.zero_()
    call()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(5):
        cache.zero_()
        with torch.profiler.record_function("call"):
            call()
    torch.cuda.synchronize()
prof.export_chrome_trace(prefix + ".trace.json")
with open(prefix + ".trace.json") as f:
    events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
calls = sorted(e["ts"] for e in events if e["name"] == "call" and e.get("cat") == "user_annotation")
start = calls[-2]
print(f"== {name} pdl={sys.argv[1]} shape={shape}; calls start at", [round(c - calls[0]) for c in calls])
rows = []
for e in events:
    cat = e.get("cat", "")
    if cat in ("kernel", "gpu_memset", "gpu_memcpy") or cat in ("cuda_runtime", "cuda_driver"):
        if e["ts"] >= start - 50:
            rows.append((e["ts"] - start, e.get("dur", 0), cat, e["name"][:70]))
for ts, dur, cat, n in sorted(rows):
    print(f"{ts:9.1f} {dur:8.1f} {cat:13s} {n}")
