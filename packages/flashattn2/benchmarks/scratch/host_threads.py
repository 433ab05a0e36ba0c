"""Scratch (v113): which thread spends an eager call's host time, and on what.

    python host_threads.py '[1,16,16,2048,128,true]'

Eager forward+backward of flashattn2, 300 calls per round behind a sleeping GPU (so that the host never
waits for it): host ms per call and each thread's CPU ms (from /proc); then the plans alone; then a cProfile
of 200 calls with autograd's device threads off (the backward on the calling thread)."""

import cProfile
import json
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import matrix  # noqa: E402
import torch  # noqa: E402

from flashattn2._triton_backward import triton_backward  # noqa: E402
from flashattn2._triton_forward import triton_forward  # noqa: E402

shape = tuple(json.loads(sys.argv[1]))
fn, ctx = matrix.implementations()["flashattn2"]
q, k, v, g = matrix.inputs(shape)
call = matrix.passes(fn, ctx, q, k, v, g, shape[-1])["fwd_bwd_ms"]
tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
tag = " ".join(f"{k}={v}" for k, v in os.environ.items() if k.startswith("FLASHATTN2"))


def threads():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/self/task/{tid}/comm") as f:
            out[tid] = (f.read().strip(), (int(fields[11]) + int(fields[12])) * tick_ms)
    return out


def host_ms(fn, calls=300, sleep=True):
    torch.cuda.synchronize()
    before = threads()
    t0 = time.perf_counter()
    for _ in range(calls):
        if sleep:
            torch.cuda._sleep(1_000_000)
        fn()
    t1 = time.perf_counter()
    after = threads()
    torch.cuda.synchronize()
    busy = {f"{after[t][0]}:{t}": round(after[t][1] - before.get(t, (0, 0))[1]) for t in after}
    busy = {t: ms for t, ms in busy.items() if ms > 0}
    return 1e3 * (t1 - t0) / calls, busy


for _ in range(30):
    call()
for r in range(3):
    ms, busy = host_ms(call)
    print(f"{shape} {tag} eager, behind a sleeping GPU: host {ms:.3f} ms/call; thread CPU ms over 300 calls {busy}")
scale = shape[4] ** -0.5
out, lse = triton_forward(q.detach(), k.detach(), v.detach(), shape[-1], scale)
for r in range(2):
    ms, _ = host_ms(lambda: triton_forward(q.detach(), k.detach(), v.detach(), shape[-1], scale))
    ms_b, _ = host_ms(lambda: triton_backward(g, q.detach(), k.detach(), v.detach(), out, lse, shape[-1], scale))
    print(f"{shape} {tag} plans alone on the main thread: forward {ms:.3f} ms/call, backward {ms_b:.3f}")
torch.autograd.set_multithreading_enabled(False)
ms, busy = host_ms(call)
print(f"{shape} {tag} eager, device threads off: host {ms:.3f} ms/call {busy}")
profile = cProfile.Profile()
torch.cuda.synchronize()
profile.enable()
for _ in range(200):
    torch.cuda._sleep(1_000_000)
    call()
profile.disable()
torch.cuda.synchronize()
pstats.Stats(profile).sort_stats("tottime").print_stats(28)
