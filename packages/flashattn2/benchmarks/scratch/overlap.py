"""Kernel timelines of backward modules (argv[1:], and gb_head): when the dq epilogue starts and ends against the
backward kernel, from torch.profiler's device events of the last of five calls."""
import importlib, json, os, sys
sys.path.insert(0, os.path.dirname(__file__))
import torch
from flashattn2._triton_forward import triton_forward

mods = {name: importlib.import_module(name) for name in ["gb_head", *sys.argv[1:]]}
rows = []
for b, h, n, d, causal in [(1, 16, 16384, 64, True), (4, 16, 4096, 128, True), (4, 16, 4096, 128, False)]:
    q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    out, lse = triton_forward(q, k, v, causal, d**-0.5)
    for name, mod in mods.items():
        hb = mod.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, d**-0.5)
        grads = [torch.empty_like(x) for x in (q, k, v)]
        for _ in range(3):
            hb(g, q, k, v, out, lse, *grads)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                hb(g, q, k, v, out, lse, *grads)
            torch.cuda.synchronize()
        ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        ev.sort(key=lambda e: e.time_range.start)
        last = ev[-3:]  # prologue, kernel, epilogue of the last call
        t0 = last[0].time_range.start
        row = {"module": name, "shape": (b, h, n, d), "causal": causal,
               "kernels_us": [(e.name[:24], round(e.time_range.start - t0, 1), round(e.time_range.end - t0, 1)) for e in last],
               "span_us": round(max(e.time_range.end for e in last) - t0, 1)}
        print(json.dumps(row), flush=True)
        rows.append(row)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "overlap.json"), "w"), indent=1)
