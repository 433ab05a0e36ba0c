"""Where a Hopper backward program's time goes at its boundaries (gb_timed: globaltimer and clock64 stamps per
program), and the package's backward time at constant work over N (per-program fixed cost by a linear fit).
Writes $OUT/boundaries.json."""
import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gb_head
import gb_timed

from flashattn2._triton_forward import triton_forward

OUT = os.environ.get("OUT", ".")
res = {"device": torch.cuda.get_device_name(), "boundaries": [], "fit": []}


def inputs(b, h, n, d, causal):
    q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    out, lse = triton_forward(q, k, v, causal, d**-0.5)
    return q, k, v, g, out, lse


def make(mod, q, k, v, g, out, lse, causal):
    d = q.shape[-1]
    hb = mod.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, causal, d**-0.5)
    grads = [torch.empty_like(x) for x in (q, k, v)]
    return hb, (lambda: hb(g, q, k, v, out, lse, *grads)), grads


for b, h, n, d, causal in [(4, 16, 4096, 128, False), (4, 16, 4096, 128, True), (1, 16, 16384, 64, True),
                           (4, 16, 4096, 64, False)]:
    x = inputs(b, h, n, d, causal)
    _, f_head, g_head = make(gb_head, *x, causal)
    hb, f_timed, g_timed = make(gb_timed, *x, causal)
    f_head(); f_timed(); torch.cuda.synchronize()
    equal = all(torch.equal(a, c) for a, c in zip(g_head, g_timed))
    ms = {"head": [], "timed": []}
    for r in range(3):
        for name, f in ((("head", f_head), ("timed", f_timed)) if r % 2 == 0 else (("timed", f_timed), ("head", f_head))):
            ms[name].append(triton.testing.do_bench(f, return_mode="median"))
    for _ in range(20):
        f_timed()
    torch.cuda.synchronize()
    st = hb.stamps.cpu()
    t, c, sm = st[:, 0:8], st[:, 8:16], st[:, 16]
    exit_c = torch.maximum(c[:, 3], torch.maximum(c[:, 4], c[:, 5]))
    exit_t = torch.maximum(t[:, 3], torch.maximum(t[:, 4], t[:, 5]))
    rows = {"startup": [], "drain": [], "launch_gap": [], "boundary": [], "span": [], "programs_per_sm": [],
            "ns_per_cycle": []}
    per_sm = {}
    for s in sm.unique().tolist():
        idx = (sm == s).nonzero().flatten()
        idx = idx[c[idx, 0].argsort()]
        nspc = float((exit_t[idx[-1]] - t[idx[0], 0]) / (exit_c[idx[-1]] - c[idx[0], 0]))
        rows["ns_per_cycle"].append(nspc)
        rows["programs_per_sm"].append(len(idx))
        span = float(exit_c[idx[-1]] - c[idx[0], 0]) * nspc
        rows["span"].append(span)
        for a, bb in zip(idx[:-1].tolist(), idx[1:].tolist()):
            rows["launch_gap"].append(float(c[bb, 0] - exit_c[a]) * nspc)
            rows["boundary"].append(float(c[bb, 1] - c[a, 2]) * nspc)
        for p in idx.tolist():
            rows["startup"].append(float(c[p, 1] - c[p, 0]) * nspc)
            rows["drain"].append(float(exit_c[p] - c[p, 2]) * nspc)
        per_sm[s] = idx.tolist()
    kernel_ns = float(exit_t.max() - t[:, 0].min())
    summary = {k: {"median": statistics.median(v), "mean": statistics.fmean(v), "sum": sum(v)} for k, v in rows.items() if v}
    program_ns = (exit_c - c[:, 0]).double().mean().item() * statistics.median(rows["ns_per_cycle"])
    row = {"shape": (b, h, n, d), "causal": causal, "bitwise_equal": equal, "ms": {k: statistics.median(v) for k, v in ms.items()},
           "kernel_ns_by_stamps": kernel_ns, "program_ns_mean": program_ns, "summary": summary,
           "boundary_share_of_sm_span": summary["boundary"]["sum"] / summary["span"]["sum"],
           "tail_ns_median": statistics.median(kernel_ns - float(exit_t[per_sm[s][-1]] - t[:, 0].min()) for s in per_sm),
           "head_ns_median": statistics.median(float(t[per_sm[s][0], 0] - t[:, 0].min()) for s in per_sm)}
    print(json.dumps(row), flush=True)
    torch.save(st, os.path.join(OUT, f"stamps-{b}-{h}-{n}-{d}-{int(causal)}.pt"))
    res["boundaries"].append(row)

# constant work, N varied: T = programs / SMs * (fixed + steps * t_step) for a full walk
for d in (128, 64):
    for b, n in ((8, 2048), (4, 4096), (2, 8192), (1, 16384)):
        x = inputs(b, 16, n, d, False)
        _, f, _ = make(gb_head, *x, False)
        f()
        ms = statistics.median(triton.testing.do_bench(f, return_mode="median") for _ in range(3))
        row = {"shape": (b, 16, n, d), "causal": False, "ms": ms}
        print(json.dumps(row), flush=True)
        res["fit"].append(row)
json.dump(res, open(os.path.join(OUT, "boundaries.json"), "w"), indent=1)
