"""A/B of scratch Triton forward modules (argv[1:]) against tf_head (the package's), Hopper forward off: error
against float64 on the first head, and GPU time as CUDA-graph replays and by do_bench (5 alternating rounds)."""
import importlib
import json
import os
import statistics
import sys

os.environ["FLASHATTN2_HOPPER_FORWARD"] = "0"
import torch
import triton
from flashattn2._launch import alignments

sys.path.insert(0, os.path.dirname(__file__))
mods = {name: importlib.import_module(name) for name in ["tf_head", *sys.argv[1:]]}
SHAPES = json.loads(os.environ["AB_SHAPES"]) if "AB_SHAPES" in os.environ else [
    (8, 16, 1024, 64, True, "bf16"), (8, 16, 1024, 64, True, "fp16"), (8, 16, 2048, 64, True, "bf16"),
    (8, 16, 2048, 64, False, "bf16"), (32, 16, 1024, 64, True, "bf16"), (4, 16, 2048, 64, True, "bf16"),
    (8, 16, 512, 64, True, "bf16"), (4, 16, 1024, 64, False, "bf16"), (8, 16, 512, 128, True, "bf16"),
    (4, 16, 4096, 64, True, "bf16")]
rows = []
for b, h, n, d, causal, dt in SHAPES:
    dtype = torch.bfloat16 if dt == "bf16" else torch.float16
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=dtype) for _ in range(3))
    qh, kh, vh = (x[0, 0].double() for x in (q, k, v))
    sc = (qh @ kh.T) * d**-0.5
    if causal:
        sc = sc.masked_fill(torch.ones(n, n, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    ref = torch.softmax(sc, -1) @ vh
    fns, err = {}, {}
    for name, mod in mods.items():
        plan = mod.ForwardPlan(q.shape, q.stride(), k.shape, k.stride(), v.stride(), dtype, q.device, causal,
                               d**-0.5, alignments(q, k, v))
        o, lse = plan(q, k, v)
        err[name] = (o[0, 0].double() - ref).abs().max().item()
        fns[name] = lambda plan=plan: plan(q, k, v)
    row = {"shape": (b, h, n, d), "causal": causal, "dtype": dt, **{f"{m}_err64": e for m, e in err.items()}}
    for mode, bench in (("graph", triton.testing.do_bench_cudagraph), ("eager", triton.testing.do_bench)):
        samples = {name: [] for name in fns}
        for r in range(5):
            for name in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
                samples[name].append(bench(fns[name], rep=200, return_mode="median"))
        for name in fns:
            row[f"{name}_{mode}"] = statistics.median(samples[name])
            if name != "tf_head":
                row[f"{name}/head_{mode}"] = statistics.median(
                    a / c for a, c in zip(samples[name], samples["tf_head"]))
    print({k_: (round(v_, 4) if isinstance(v_, float) else v_) for k_, v_ in row.items()}, flush=True)
    rows.append(row)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), os.environ.get("AB_NAME", "ab_tfwd") + ".json"), "w"),
          indent=1)
