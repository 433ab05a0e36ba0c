"""The Hopper backward at head dim 256 on the GPU: (1) dq, dk, dv against the float64 reference (the package's
accuracy rule), repeatable bitwise, at ragged, grouped-query, negative-scale and persistent cases, forced below
the thresholds; (2) the backward alone (``triton_backward``) with the Hopper kernel, one program per causal item
or persistent, against the Triton kernels, do_bench medians in alternating rounds. Writes $OUT/check-d256.json.
Run from the repository root: PYTHONPATH=packages/flashattn2/src python .../scratch/check_d256.py"""

import json
import os
import statistics
import traceback

import torch
import triton

import flashattn2._gluon_backward as gb
import flashattn2._triton_backward as backward
from flashattn2 import flash_attention
from flashattn2._hopper import below_thresholds
from flashattn2._inputs import check_attention_inputs
from flashattn2._triton_forward import triton_forward
from flashattn2.testing import assert_attention_matches_reference

out_path = os.path.join(os.environ.get("OUT", "."), "check-d256.json")
result = {"accuracy": [], "timing": []}


def save():
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)


CASES = [  # q shape, kv shape, dtype, causal, scale, MPS percentage (persistent programs take several items)
    ((2, 4, 1000, 256), (2, 2, 1000, 256), torch.bfloat16, True, None, None),
    ((1, 3, 1000, 256), (1, 3, 1000, 256), torch.float16, False, None, None),
    ((1, 2, 1000, 256), (1, 2, 1000, 256), torch.bfloat16, True, -0.3, None),
    ((1, 3, 2100, 256), (1, 1, 2100, 256), torch.bfloat16, False, None, None),
    ((2, 4, 2100, 256), (2, 2, 2100, 256), torch.bfloat16, True, None, "15"),
    ((2, 4, 2100, 256), (2, 2, 2100, 256), torch.bfloat16, False, None, "15"),
    ((1, 2, 4096, 256), (1, 2, 4096, 256), torch.bfloat16, True, None, None),
]
with below_thresholds():
    for persistent in [(64,), (64, 256)]:
        gb.PERSISTENT_CAUSAL_HEAD_DIMS = persistent
        for q_shape, kv_shape, dtype, causal, scale, mps in CASES:
            row = {"case": str((q_shape, kv_shape, dtype, causal, scale, mps)), "persistent": persistent}
            try:
                if mps:
                    os.environ["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = mps
                backward.backward_plan.cache_clear()
                q, k, v = (torch.randn(s, device="cuda", dtype=dtype) for s in (q_shape, kv_shape, kv_shape))
                sc = check_attention_inputs(q, k, v) if scale is None else scale
                plan = backward.plan_for(q, q, k, v, q, causal, sc)
                row["hopper"] = plan.hopper is not None
                if plan.hopper is not None:
                    row["grid"], row["items"] = plan.hopper.grid[0], plan.hopper.items
                fn = lambda q, k, v, c: flash_attention(q, k, v, causal=c, softmax_scale=sc)  # noqa: E731
                assert_attention_matches_reference(fn, q, k, v, causal=causal, softmax_scale=sc)
                row["accurate"] = True
                row["launched"] = plan.hopper is not None and plan.hopper.launched
                grads = []
                g = torch.randn_like(q)
                for _ in range(2):
                    qq, kk, vv = (x.detach().requires_grad_() for x in (q, k, v))
                    fn(qq, kk, vv, causal).backward(g)
                    grads.append([x.grad.clone() for x in (qq, kk, vv)])
                row["repeatable"] = all(torch.equal(a, b) for a, b in zip(*grads))
            except Exception as e:  # noqa: BLE001
                row["error"] = "".join(traceback.format_exception_only(e))[-2000:]
            finally:
                os.environ.pop("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", None)
                backward.backward_plan.cache_clear()
            print(row, flush=True)
            result["accuracy"].append(row)
            save()

WAYS = {"triton": ("0", (64,)), "hopper": ("1", (64,)), "hopper persistent": ("1", (64, 256))}
with below_thresholds():
    for shape, causal in [
        ((2, 16, 4096, 256), True),
        ((2, 16, 4096, 256), False),
        ((4, 8, 2048, 256), True),
        ((4, 16, 2048, 256), False),
        ((1, 16, 8192, 256), True),
        ((8, 16, 1024, 256), True),
        ((8, 16, 512, 256), True),
        ((16, 16, 512, 256), False),
    ]:
        q, k, v, g = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        scale = shape[-1] ** -0.5
        o, lse = triton_forward(q, k, v, causal, scale)
        samples = {w: [] for w in WAYS}
        outs = {}
        for r in range(5):
            for w in list(WAYS) if r % 2 == 0 else list(WAYS)[::-1]:
                os.environ["FLASHATTN2_HOPPER_BACKWARD"], gb.PERSISTENT_CAUSAL_HEAD_DIMS = WAYS[w]
                backward.backward_plan.cache_clear()
                run = lambda: backward.triton_backward(g, q, k, v, o, lse, causal, scale)  # noqa: E731
                if w not in outs:
                    outs[w] = [x.clone() for x in run()]
                samples[w].append(triton.testing.do_bench(run, warmup=25, rep=150, return_mode="median"))
        row = {"shape": shape, "causal": causal, "ms": {w: round(statistics.median(t), 4) for w, t in samples.items()}}
        for w in list(WAYS)[1:]:
            row[f"{w}/triton"] = round(statistics.median(a / b for a, b in zip(samples[w], samples["triton"])), 4)
            row[f"{w} max diff"] = max((a.float() - b.float()).abs().max().item() for a, b in zip(outs[w], outs["triton"]))
        print(row, flush=True)
        result["timing"].append(row)
        save()
os.environ.pop("FLASHATTN2_HOPPER_BACKWARD", None)
