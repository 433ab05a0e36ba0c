"""Forward-kernel experiments, each switched on alone and timed side by side with the kernel as shipped.

Usage (CUDA GPU, repository root)::

    PYTHONPATH=packages/flashattn2/src python packages/flashattn2/benchmarks/experiments.py

Variants of ``flashattn2._triton_forward.EXPERIMENT``: ``global_order`` (one
program list over every (batch, head), the heaviest query tiles of all heads
first, instead of heavy-first within each head) and ``tma`` (Q, K and V tiles
loaded through Hopper's tensor-memory accelerator, ``TensorDescriptor``). For
each shape: the output must equal the shipped kernel's bit for bit, then
forward and forward+backward times (``triton.testing.do_bench`` median),
rotating through the variants three times.
"""

from __future__ import annotations

import json
import sys

import torch
import triton

from flashattn2 import _triton_forward, flash_attention

SHAPES = [(1, 16, 16384, 64), (4, 16, 4096, 128)]  # (B, H, N, D), causal, bf16
VARIANTS = {"shipped": {}, "global_order": {"global_order": True}, "tma": {"tma": True},
            "both": {"global_order": True, "tma": True}}


def use(variant: str) -> None:
    _triton_forward.EXPERIMENT.update({"global_order": False, "tma": False, **VARIANTS[variant]})
    _triton_forward.forward_plan.cache_clear()


def main() -> int:
    results = []
    for shape in SHAPES:
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        g = torch.randn_like(q)
        use("shipped")
        with torch.no_grad():
            reference = flash_attention(q, k, v, causal=True)
        times = {name: {"fwd": [], "fwd_bwd": []} for name in VARIANTS}
        for name in VARIANTS:
            use(name)
            try:
                with torch.no_grad():
                    same = torch.equal(flash_attention(q, k, v, causal=True), reference)
            except Exception as error:  # a variant that does not compile is a result too
                print(f"{shape} {name}: {type(error).__name__}: {str(error)[-600:]}", flush=True)
                times.pop(name)
                continue
            print(f"{shape} {name}: output bitwise equal to shipped: {same}", flush=True)
        for _ in range(3):
            for name in times:
                use(name)
                with torch.no_grad():
                    times[name]["fwd"].append(triton.testing.do_bench(
                        lambda: flash_attention(q, k, v, causal=True), warmup=50, rep=200, return_mode="median"))
                times[name]["fwd_bwd"].append(triton.testing.do_bench(
                    lambda: torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), g),
                    warmup=50, rep=200, return_mode="median"))
        for name, t in times.items():
            fwd, fwd_bwd = sorted(t["fwd"])[1], sorted(t["fwd_bwd"])[1]
            print(f"{shape} {name:13} fwd {fwd:.3f} ms  fwd+bwd {fwd_bwd:.3f} ms", flush=True)
            results.append({"shape": shape, "variant": name, "fwd_ms": t["fwd"], "fwd_bwd_ms": t["fwd_bwd"]})
    use("shipped")
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
