"""Headline benchmark of flashattn2 against PyTorch SDPA (FLASH and CUDNN backends), same run, same inputs.

Usage (on a CUDA GPU, from the repository root)::

    PYTHONPATH=packages/flashattn2/src python packages/flashattn2/benchmarks/headline.py --out headline.json

For each shape it first checks our output and gradients against SDPA's math
backend in float32 on two heads (relative error, next to SDPA FLASH's own), then
times forward and forward+backward with ``triton.testing.do_bench`` (median) for
flashattn2, SDPA FLASH_ATTENTION and SDPA CUDNN_ATTENTION, and reports ms,
TFLOP/s (forward 4*B*H*N^2*D, half when causal; backward 2.5x forward) and
ratios. Last, the long-sequence memory check: peak extra memory of a causal
forward+backward at N = 32768, 65536, 131072 (B=1, H=16, D=64, bf16).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashattn2
from flashattn2 import flash_attention
from flashattn2._triton_backward import _dkdv_kernel, _dq_kernel
from flashattn2._triton_forward import _forward_kernel

SHAPES = [  # (B, H, N, D, causal); the first is the headline
    (1, 16, 16384, 64, True),
    (4, 16, 4096, 128, True),
    (4, 16, 4096, 128, False),
]
MEMORY_LENGTHS = (32768, 65536, 131072)
CHECK_HEADS = 2  # heads compared against the float32 math reference (it materializes N x N)


def forward_flops(b, h, n, d, causal):
    return 4 * b * h * n * n * d / (2 if causal else 1)


def implementations():
    def ours(q, k, v, causal):
        return flash_attention(q, k, v, causal=causal)

    def sdpa(backend):
        def run(q, k, v, causal):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return run

    return {
        "flashattn2": ours,
        "sdpa_flash": sdpa(SDPBackend.FLASH_ATTENTION),
        "sdpa_cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
    }


def rel_err(x, ref):
    return ((x.float() - ref).norm() / ref.norm()).item()


def check(shape, impls):
    """Relative errors of O, dq, dk, dv on CHECK_HEADS heads against SDPA math in float32."""
    b, h, n, d, causal = shape
    q, k, v, g = (torch.randn(1, CHECK_HEADS, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    q32, k32, v32 = (x.float().requires_grad_(True) for x in (q, k, v))
    with sdpa_kernel(SDPBackend.MATH):
        o_ref = F.scaled_dot_product_attention(q32, k32, v32, is_causal=causal)
    refs = (o_ref.detach(), *torch.autograd.grad(o_ref, (q32, k32, v32), g.float()))
    del o_ref, q32, k32, v32
    errors = {}
    for name in ("flashattn2", "sdpa_flash"):
        qs, ks, vs = (x.clone().requires_grad_(True) for x in (q, k, v))
        o = impls[name](qs, ks, vs, causal)
        outs = (o, *torch.autograd.grad(o, (qs, ks, vs), g))
        errors[name] = {key: rel_err(x, r) for key, x, r in zip(("O", "dq", "dk", "dv"), outs, refs)}
    return errors


def time_shape(shape, impls):
    b, h, n, d, causal = shape
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn_like(q)
    fwd_flops = forward_flops(*shape)
    row = {}
    for name, fn in impls.items():
        with torch.no_grad():
            t_fwd = triton.testing.do_bench(lambda: fn(q, k, v, causal), warmup=100, rep=500, return_mode="median")
        t_fb = triton.testing.do_bench(
            lambda: torch.autograd.grad(fn(q, k, v, causal), (q, k, v), g), warmup=100, rep=500, return_mode="median"
        )
        row[name] = {
            "fwd_ms": t_fwd,
            "fwd_bwd_ms": t_fb,
            "fwd_tflops": fwd_flops / t_fwd / 1e9,
            "fwd_bwd_tflops": 3.5 * fwd_flops / t_fb / 1e9,
        }
    return row


def memory_check():
    heads, d = 16, 64
    result = {}
    for n in MEMORY_LENGTHS:
        q, k, v = (torch.randn(1, heads, n, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        g = torch.randn_like(q)
        # A first run autotunes this length bucket; its benchmarking buffers must not count.
        torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), g)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), g)
        end.record()
        torch.cuda.synchronize()
        extra = torch.cuda.max_memory_allocated() - before
        result[n] = {
            "extra_bytes": extra,
            "extra_bytes_per_token": extra / n,
            "fwd_bwd_ms_single_run": start.elapsed_time(end),
        }
        del q, k, v, g
    return result


def best_configs():
    out = {}
    for name, kernel in (("forward", _forward_kernel), ("dkdv", _dkdv_kernel), ("dq", _dq_kernel)):
        out[name] = {str(key): str(cfg) for key, cfg in getattr(kernel, "cache", {}).items()}
    return out


def print_report(results) -> None:
    """The readable table: timings and ratios per shape, then the memory check."""
    print("\nbf16, triton.testing.do_bench median; ratio = SDPA time / flashattn2 time (>1: flashattn2 faster)")
    columns = ("flashattn2 ms", "TFLOP/s", "FLASH ms", "CUDNN ms", "vs FLASH", "vs CUDNN")
    widths = (14, 8, 9, 9, 9, 9)
    print(f"{'shape (B,H,N,D,causal)':28} {'pass':8} " + " ".join(f"{c:>{w}}" for c, w in zip(columns, widths)))
    for entry in results["shapes"]:
        s = entry["shape"]
        for mode, key in (("fwd", "fwd_ms"), ("fwd+bwd", "fwd_bwd_ms")):
            t = entry["timings"]
            ours, fl, cu = t["flashattn2"][key], t["sdpa_flash"][key], t["sdpa_cudnn"][key]
            tflops = t["flashattn2"][key.replace("ms", "tflops")]
            label = f"{s['B']},{s['H']},{s['N']},{s['D']},{s['C']}"
            values = f"{ours:14.3f} {tflops:8.1f} {fl:9.3f} {cu:9.3f} {fl / ours:9.2f} {cu / ours:9.2f}"
            print(f"{label:28} {mode:8} {values}")
    if "memory" in results:
        print("\nlong-sequence memory, causal fwd+bwd, B=1 H=16 D=64 bf16:")
        for n, m in results["memory"].items():
            print(f"  N={n:>6}: extra {m['extra_bytes'] / 2**20:9.1f} MiB = {m['extra_bytes_per_token']:.0f} B/token, "
                  f"one run {m['fwd_bwd_ms_single_run']:.1f} ms")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write all numbers as JSON to this path")
    parser.add_argument("--skip-memory", action="store_true", help="skip the N=131072 memory check")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    impls = implementations()
    env = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "python": platform.python_version(),
        "flashattn2": flashattn2.__version__,
    }
    print(env, flush=True)
    results = {"env": env, "shapes": []}
    for shape in SHAPES:
        errors = check(shape, impls)
        print(f"check {shape}: {errors}", flush=True)
        timings = time_shape(shape, impls)
        results["shapes"].append({"shape": dict(zip("BHNDC", shape)), "errors": errors, "timings": timings})
    if not args.skip_memory:
        results["memory"] = memory_check()
    results["tuned_configs"] = best_configs()

    print_report(results)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
