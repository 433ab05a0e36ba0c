"""Scratch: instruction counts of the compiled kernels' SASS for variants 0 and 3 (headline and D=128)."""
import collections, re, sys, torch, os
import flashattn2._triton_common as C
from flashattn2._triton_forward import forward_plan, triton_forward
from flashattn2._triton_backward import backward_plan, triton_backward
res = {}
for d in (64, 128):
    for flags in (0, 1, 2, 3):
        C.EXPERIMENT = flags
        forward_plan.cache_clear(); backward_plan.cache_clear()
        q, k, v, g = (torch.randn(1, 2, 2048, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        o, lse = triton_forward(q, k, v, True, d ** -0.5)
        triton_backward(g, q, k, v, o, lse, True, d ** -0.5)
        triton_forward(q, k, v, True, d ** -0.5)
        triton_backward(g, q, k, v, o, lse, True, d ** -0.5)
        fplan = forward_plan(q.shape, q.stride(), k.shape, k.stride(), v.stride(), q.dtype, q.device, True, d ** -0.5, (True, True, True))
        bplan = backward_plan(q.shape, q.stride(), k.shape, k.stride(), v.stride(), o.stride(), g.stride(), q.dtype, q.device, True, d ** -0.5, (True,) * 5)
        for name, launch in (("fwd", fplan.launch), ("dq", bplan.launch_dq), ("dkdv", bplan.launch_dkdv)):
            kern = launch.kernel
            sass = kern.asm.get("sass") if hasattr(kern, "asm") else None
            ptx = kern.asm["ptx"]
            ops = collections.Counter()
            if sass:
                for line in sass.splitlines():
                    m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_]+)(\.[A-Z0-9_.]+)?", line)
                    if m: ops[m.group(2) + (m.group(3) or "")] += 1
            key = f"d{d} v{flags} {name}"
            res[key] = {"regs": kern.n_regs, "spills": kern.n_spills, "ex2_ptx": sorted(set(re.findall(r"ex2\.approx[.\w]*", ptx))),
                        "top": ops.most_common(40)}
            print(key, res[key]["regs"], res[key]["spills"], res[key]["ex2_ptx"], flush=True)
            print("   ", ops.most_common(30), flush=True)
            if flags in (0, 3) and name == "fwd" and sass:
                open(os.path.join(os.environ["OUT"], f"sass-d{d}-v{flags}-fwd.txt"), "w").write(sass)
import json; json.dump(res, open(os.path.join(os.environ["OUT"], "sass_stats.json"), "w"), indent=0)
