"""Scratch (v113): the Hopper backward's host time per call, taken apart.

    python micro_bwd.py '[1,16,16,2048,128,true]'

µs per call (median of 7 rounds of 20 calls, a synchronization between rounds) of: the whole HopperBackward call;
its three workspaces; its TMA descriptors (TmaDescriptor calls); its launches replayed through CompiledLaunch
(Triton's wrapper expands each descriptor: make_tensordesc_arg, fill_tma_descriptor); the same launches through
the C launcher with the descriptors' expansions made once; and, last, the whole call with the epilogue launched
without PDL. Then checks that the C-launcher replay gives the gradients bitwise."""

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import matrix  # noqa: E402
import torch  # noqa: E402

from flashattn2 import _launch, _triton_backward  # noqa: E402
from flashattn2._triton_forward import triton_forward  # noqa: E402

shape = tuple(json.loads(sys.argv[1]))
causal = shape[-1]
scale = shape[4] ** -0.5
q, k, v, g = (x.detach() for x in matrix.inputs(shape))
out, lse = triton_forward(q, k, v, causal, scale)
grads = _triton_backward.triton_backward(g, q, k, v, out, lse, causal, scale)
torch.cuda.synchronize()
plan = _triton_backward.plan_for(g, q, k, v, out, causal, scale)
hb = plan.hopper
assert hb is not None, "no Hopper backward at this shape"
dq, dk, dv = (torch.empty_like(x) for x in (q, k, v))
lse_flat = lse.view(-1)


def per_call_us(fn, rounds=7, calls=20):
    times = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times), min(times)


def whole():
    hb(g, q, k, v, out, lse_flat, dq, dk, dv)


captured = []
inner_call = _launch.CompiledLaunch.__call__


def capture(self, *tensors):
    captured.append((self, tensors))
    inner_call(self, *tensors)


_launch.CompiledLaunch.__call__ = capture
whole()
_launch.CompiledLaunch.__call__ = inner_call
torch.cuda.synchronize()


def replay():
    for launch, tensors in captured:
        launch(*tensors)


def expand(launch, tensors):
    """(C launcher, its arguments before the tensors', the tensors' expanded)."""
    run = launch.kernel.run
    wrapper = run.launch
    if getattr(wrapper, "__closure__", None) is None:  # no descriptors: the C function itself
        return launch.direct[0], launch.direct[1], list(tensors)
    cells = dict(zip(wrapper.__code__.co_freevars, (c.cell_contents for c in wrapper.__closure__)))
    meta = iter(cells["tensordesc_meta"])
    flat = []
    for i, x in enumerate(tensors):
        if i in cells["tensordesc_indices"]:
            from triton.backends.nvidia.driver import make_tensordesc_arg

            flat.extend(make_tensordesc_arg(x, next(meta)))
        else:
            flat.append(x)
    return cells["launcher"], launch.direct[1], flat


expanded = [(launch, *expand(launch, tensors)) for launch, tensors in captured]


def raw():
    for launch, c_launch, between, flat in expanded:
        grid = launch.grid
        stream = torch._C._cuda_getCurrentRawStream(launch.device_index)
        c_launch(grid[0], grid[1], grid[2], stream, *between, *flat, *launch.trailing)


def workspaces():
    hb.new_delta(), hb.new_dq_acc(), hb.new_counters()


def descriptors():
    for d, x in ((hb.describe_q, q), (hb.describe_k, k), (hb.describe_v, v), (hb.describe_grad_out, g),
                 (hb.describe_lse, lse_flat), (hb.describe_delta, lse_flat)):
        d(x)


results = {}
for name, fn in (("whole", whole), ("workspaces", workspaces), ("descriptors (6 of them)", descriptors),
                 ("launches through CompiledLaunch", replay), ("launches through the C launcher", raw),
                 ("whole", whole)):
    results[name] = per_call_us(fn)
    print(f"{shape} {name}: {results[name][0]:.1f} µs per call (min round {results[name][1]:.1f})", flush=True)
# bitwise: replayed raw launches write the captured call's dq, dk, dv
ref = [x.clone() for x in (dq, dk, dv)]
for x in (dq, dk, dv):
    x.zero_()
raw()
torch.cuda.synchronize()
print("raw replay bitwise equal:", all(torch.equal(a, b) for a, b in zip(ref, (dq, dk, dv))))
print("launches:", [(l.fn.__name__, l.launch_pdl) for l, _ in captured])
