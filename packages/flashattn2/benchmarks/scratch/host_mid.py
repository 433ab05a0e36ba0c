"""Scratch (v113): where an eager forward+backward's host time goes at a mid shape.

    python host_mid.py '[1,16,16,2048,128,true]' flashattn2|cudnn

Prints: host ms per call (100 calls enqueued, no synchronization inside) and wall ms per call (with the
synchronization), five rounds; do_bench's eager median; then, for flashattn2, the median offset (µs from the
call's start) of each stage's start and end over one round of 100 calls."""

import collections
import gc
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import matrix  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402

import flashattn2.autograd as fa_autograd  # noqa: E402
from flashattn2 import _gluon_backward, _gluon_forward, _launch, _triton_backward  # noqa: E402

shape = tuple(json.loads(sys.argv[1]))
name = sys.argv[2]
marks = []  # (label, ns)
recording = [False]


def wrap(owner, attr, label):
    inner = getattr(owner, attr)

    def wrapped(*args, **kwargs):
        if recording[0]:
            marks.append((label + "<", time.perf_counter_ns()))
        result = inner(*args, **kwargs)
        if recording[0]:
            marks.append((label + ">", time.perf_counter_ns()))
        return result

    setattr(owner, attr, wrapped)


if name == "flashattn2":
    wrap(fa_autograd, "attention_forward", "fwd")
    wrap(fa_autograd, "attention_backward", "bwd")
    wrap(_triton_backward.BackwardPlan, "__call__", "bwdplan")
    wrap(_gluon_backward.HopperBackward, "__call__", "hopperbwd")
    wrap(_gluon_forward.HopperForward, "__call__", "hopperfwd")
    inner_launch = _launch.CompiledLaunch.__call__

    def launch(self, *tensors):
        if recording[0]:
            marks.append(("L:" + self.fn.__name__ + "<", time.perf_counter_ns()))
        inner_launch(self, *tensors)
        if recording[0]:
            marks.append(("L:" + self.fn.__name__ + ">", time.perf_counter_ns()))

    _launch.CompiledLaunch.__call__ = launch
fn, ctx = matrix.implementations()[name]
q, k, v, g = matrix.inputs(shape)
call = matrix.passes(fn, ctx, q, k, v, g, shape[-1])["fwd_bwd_ms"]
for _ in range(30):
    call()
torch.cuda.synchronize()
for r in range(5):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(100):
        call()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    print(f"{name} {shape} round {r}: host {1e3 * (t1 - t0) / 100:.3f} ms/call, wall {1e3 * (t2 - t0) / 100:.3f}")
print(f"{name} {shape} do_bench eager {matrix.time_ms(call):.3f} ms")
for r in range(3):  # a GPU far behind the host: does the host wait for it?
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        torch.cuda._sleep(2_000_000)
        call()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    print(f"{name} {shape} behind a sleeping GPU, round {r}: host {1e3 * (t1 - t0) / 20:.3f} ms/call, wall {1e3 * (t2 - t0) / 20:.3f}")
gc.disable()
for r in range(3):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(100):
        call()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    print(f"{name} {shape} gc off, round {r}: host {1e3 * (t1 - t0) / 100:.3f} ms/call")
gc.enable()
if name == "flashattn2":
    starts = []
    recording[0] = True
    torch.cuda.synchronize()
    for _ in range(100):
        starts.append(time.perf_counter_ns())
        marks.append(("call<", starts[-1]))
        call()
        marks.append(("call>", time.perf_counter_ns()))
    recording[0] = False
    torch.cuda.synchronize()
    offsets = collections.defaultdict(list)
    call_start, seen = 0, collections.Counter()
    for label, ns in marks:
        if label == "call<":
            call_start, seen = ns, collections.Counter()
        seen[label] += 1
        offsets[(label, seen[label])].append((ns - call_start) / 1e3)
    for key, values in sorted(offsets.items(), key=lambda kv: statistics.median(kv[1])):
        print(f"{statistics.median(values):8.1f} µs  {key[0]} #{key[1]}  (min {min(values):.1f})")
print("triton", triton.__version__, "torch", torch.__version__, "hopper bwd", os.environ.get("FLASHATTN2_HOPPER_BACKWARD"))
