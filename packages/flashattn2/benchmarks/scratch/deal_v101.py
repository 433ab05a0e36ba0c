"""v101: the persistent causal backward's dealt lists, host-side variants at head dim 64: the package's (item
order, one extra step per item), three extra steps per item, and two or four (batch, head) pairs' key tiles
interleaved in the dealing order (each pair's still descending; a program's list follows the dealing order, so
an item waits only on items dealt before it). Whole backward, do_bench medians in alternating rounds; bitwise
equality with the package's lists."""
import heapq
import itertools
import json
import os
import statistics

import torch
import triton

import flashattn2._gluon_backward as gb
from flashattn2._triton_forward import triton_forward

package_schedule = gb.causal_backward_schedule


def dealt(order, cost, programs):
    loads = [(0, p) for p in range(programs)]
    taken = [[] for _ in range(programs)]
    for item in order:
        load, p = heapq.heappop(loads)
        taken[p].append(item)
        heapq.heappush(loads, (load + cost(item), p))
    offsets = list(itertools.accumulate((len(t) for t in taken), initial=programs + 1))
    return offsets + list(itertools.chain.from_iterable(taken))


def variant(extra, group):
    def schedule(items, key_tiles, q_tiles, ratio, programs):
        cost = lambda i: q_tiles - ratio * (key_tiles - 1 - i % key_tiles) + extra  # noqa: E731
        pairs = items // key_tiles
        order = []
        for first in range(0, pairs, group):
            members = range(first, min(pairs, first + group))
            for step in range(key_tiles):
                order.extend(p * key_tiles + step for p in members)
        return dealt(order, cost, programs)
    return schedule


VARIANTS = {"package": package_schedule, "extra3": variant(3, 1), "g2": variant(1, 2), "g4": variant(1, 4)}
out_path = os.path.join(os.environ.get("OUT", "."), "2026-11-27-h100-s24-v101-dealt-list-variants.json")
rows = []
for b, h, n in [(1, 16, 16384), (4, 16, 4096), (8, 16, 2048), (2, 16, 4096), (1, 16, 8192)]:
    d = 64
    q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    o, lse = triton_forward(q, k, v, True, d**-0.5)
    fns, outs = {}, {}
    for name, fn in VARIANTS.items():
        gb.causal_backward_schedule = fn
        hb = gb.HopperBackward(q.shape, k.shape, o.stride(), g.stride(), q.dtype, q.device, True, d**-0.5)
        gb.causal_backward_schedule = package_schedule
        res = (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v))
        fns[name] = lambda hb=hb, res=res: hb(g, q, k, v, o, lse, *res)
        fns[name]()
        torch.cuda.synchronize()
        outs[name] = [x.clone() for x in res]
    samples = {name: [] for name in fns}
    for r in range(7):
        for name in list(fns) if r % 2 == 0 else list(fns)[::-1]:
            samples[name].append(triton.testing.do_bench(fns[name], warmup=25, rep=150, return_mode="median"))
    row = {"shape": (b, h, n, d), "ms": {k_: round(statistics.median(t), 4) for k_, t in samples.items()}}
    for name in fns:
        if name != "package":
            row[f"{name}/package"] = round(statistics.median(a / c for a, c in zip(samples[name], samples["package"])), 4)
            row[f"{name}_bitwise"] = all(torch.equal(x, y) for x, y in zip(outs[name], outs["package"]))
    print(row, flush=True)
    rows.append(row)
    json.dump(rows, open(out_path, "w"), indent=1)
