"""Scratch (v113): the launches of one Hopper forward and one Hopper backward, host µs per call, with TMA
descriptors expanded once per pointer (new, shipped) or by Triton's wrapper on every launch (old): 15 alternating
rounds of 20 calls in one process, a synchronization between rounds.

    python micro_ab.py '[1,16,16,2048,128,true]'"""

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import matrix  # noqa: E402
import torch  # noqa: E402

from flashattn2 import _launch, _triton_backward, _triton_forward  # noqa: E402

shape = tuple(json.loads(sys.argv[1]))
causal, scale = shape[-1], shape[4] ** -0.5
q, k, v, g = (x.detach() for x in matrix.inputs(shape))
out, lse = _triton_forward.triton_forward(q, k, v, causal, scale)
_triton_backward.triton_backward(g, q, k, v, out, lse, causal, scale)
captured = []
shipped_call = _launch.CompiledLaunch.__call__


def capture(self, *tensors):
    captured.append((self, tensors))
    shipped_call(self, *tensors)


_launch.CompiledLaunch.__call__ = capture
_triton_forward.triton_forward(q, k, v, causal, scale)
forward = captured[:]
captured.clear()
_triton_backward.triton_backward(g, q, k, v, out, lse, causal, scale)
backward = captured[:]
_launch.CompiledLaunch.__call__ = shipped_call
torch.cuda.synchronize()
print("forward:", [launch.fn.__name__ for launch, _ in forward], "backward:", [launch.fn.__name__ for launch, _ in backward])
paths = {}
for launch, _ in forward + backward:
    new = launch.direct
    old = (launch.kernel.run.launch, new[1], None) if new[2] is not None else new
    paths[launch] = {"new": new, "old": old}


def per_call_us(launches, calls=20):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        for launch, tensors in launches:
            launch(*tensors)
    return (time.perf_counter() - t0) / calls * 1e6


times = {(part, path): [] for part in ("forward", "backward") for path in ("new", "old")}
for r in range(15):
    for path in ("new", "old") if r % 2 == 0 else ("old", "new"):
        for launch in paths:
            launch.direct = paths[launch][path]
        for part, launches in (("forward", forward), ("backward", backward)):
            times[(part, path)].append(per_call_us(launches))
torch.cuda.synchronize()
for (part, path), values in times.items():
    print(f"{shape} {part} launches, {path}: median {statistics.median(values):.1f} µs, min {min(values):.1f}")
