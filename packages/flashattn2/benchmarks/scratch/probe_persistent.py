"""Where the persistent full walk's time goes at its item boundaries (gb_ptimed: stamps per item), against the
package's time (gb_new). Writes $OUT/persistent-boundaries.json."""
import json
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gb_new
import gb_ptimed

from flashattn2._triton_forward import triton_forward

OUT = os.environ.get("OUT", ".")
res = {"device": torch.cuda.get_device_name(), "rows": []}


def make(mod, q, k, v, g, out, lse):
    d = q.shape[-1]
    hb = mod.HopperBackward(q.shape, k.shape, out.stride(), g.stride(), q.dtype, q.device, False, d**-0.5)
    grads = [torch.empty_like(x) for x in (q, k, v)]
    return hb, (lambda: hb(g, q, k, v, out, lse, *grads)), grads


def q3(x):
    return [round(float(v), 0) for v in torch.quantile(torch.tensor(x, dtype=torch.double), torch.tensor([0.1, 0.5, 0.9], dtype=torch.double))]


for b, h, n, d in [(4, 16, 4096, 128), (4, 16, 4096, 64)]:
    q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    out, lse = triton_forward(q, k, v, False, d**-0.5)
    _, f_new, g_new = make(gb_new, q, k, v, g, out, lse)
    hb, f_timed, g_timed = make(gb_ptimed, q, k, v, g, out, lse)
    f_new(); f_timed(); torch.cuda.synchronize()
    equal = all(torch.equal(a, c) for a, c in zip(g_new, g_timed))
    ms = {"new": [], "timed": []}
    for r in range(5):
        for name, f in ((("new", f_new), ("timed", f_timed)) if r % 2 == 0 else (("timed", f_timed), ("new", f_new))):
            ms[name].append(triton.testing.do_bench(f, return_mode="median"))
    for _ in range(10):
        f_timed()
    torch.cuda.synchronize()
    st = hb.stamps.cpu()
    t, c, sm = st[:, 0:8].double(), st[:, 8:16].double(), st[:, 16]
    rows = {k: [] for k in ("boundary", "stores", "kv_reissue", "kv_latency", "writer_tail", "item", "span")}
    for s in sm.unique().tolist():
        idx = (sm == s).nonzero().flatten()
        idx = idx[c[idx, 1].argsort()]
        nspc = float((t[idx[-1], 3] - t[idx[0], 1]) / (c[idx[-1], 3] - c[idx[0], 1]))
        rows["span"].append(float(c[idx[-1], 3] - c[idx[0], 0]) * nspc)
        for a, bb in zip(idx[:-1].tolist(), idx[1:].tolist()):
            rows["boundary"].append(float(c[bb, 1] - c[a, 2]) * nspc)  # last step of a -> b's K and V in
            rows["kv_reissue"].append(float(c[bb, 6] - c[a, 3]) * nspc)  # a's buffers released -> b's K/V issued
            rows["kv_latency"].append(float(c[bb, 1] - c[bb, 6]) * nspc)  # issued -> arrived (consumer)
        for p in idx.tolist():
            rows["stores"].append(float(c[p, 3] - c[p, 2]) * nspc)
            rows["writer_tail"].append(float(max(c[p, 4], c[p, 5]) - c[p, 2]) * nspc)
            rows["item"].append(float(c[p, 2] - c[p, 1]) * nspc)
    row = {"shape": (b, h, n, d), "bitwise_equal": equal, "ms": {k: statistics.median(x) for k, x in ms.items()},
           "ns_p10_p50_p90": {k: q3(x) for k, x in rows.items() if k != "span"},
           "boundary_share": sum(rows["boundary"]) / sum(rows["span"])}
    print(json.dumps(row), flush=True)
    res["rows"].append(row)
json.dump(res, open(os.path.join(OUT, "persistent-boundaries.json"), "w"), indent=1)
