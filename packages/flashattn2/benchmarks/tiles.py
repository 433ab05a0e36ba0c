"""Time every tile configuration of each flashattn2 kernel at one shape, one kernel at a time.

Usage (on a CUDA GPU, from the repository root)::

    PYTHONPATH=packages/flashattn2/src python packages/flashattn2/benchmarks/tiles.py \
        --shape 1 16 16384 64 --causal --extra-dkdv 64,128,8,3 --out tiles.json

For the forward kernel, and for the backward with the dQ or the dK/dV kernel's
configuration varied (the other at its default), each candidate configuration
of ``flashattn2._configs`` that fits the GPU (plus any given with ``--extra-*``)
is pinned, run once (compiled; the first-run time is printed) and timed with
``triton.testing.do_bench`` (median). Backward times are both kernels'. Configurations that fail to
compile or run out of resources are reported as such. The fastest of each kernel
is what ``flashattn2._configs``' default table should hold for this shape's
(head-dim bucket, dtype, causal).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch
import triton

from flashattn2._configs import Tile, candidate_tiles, default_tile
from flashattn2._triton_backward import backward_plan, dkdv_tiles, dq_tiles, triton_backward
from flashattn2._triton_common import seq_len_bucket
from flashattn2._triton_forward import forward_plan, forward_tiles, triton_forward

CHOOSERS = {"forward": forward_tiles, "dq": dq_tiles, "dkdv": dkdv_tiles}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def parse_tile(text: str) -> Tile:
    return Tile(*(int(x) for x in text.split(",")))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=4, metavar=("B", "H", "N", "D"), default=[1, 16, 16384, 64])
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--dtype", choices=DTYPES, default="bf16")
    parser.add_argument("--kernels", nargs="+", choices=CHOOSERS, default=list(CHOOSERS), help="which kernels to time")
    for name in CHOOSERS:
        parser.add_argument(
            f"--extra-{name}",
            type=parse_tile,
            nargs="*",
            default=[],
            metavar="M,N,WARPS,STAGES",
            help=f"tiles to try besides the {name} candidates",
        )
    parser.add_argument("--out", help="write the table as JSON here")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2

    b, h, n, d = args.shape
    dtype = DTYPES[args.dtype]
    q, k, v, grad_out = (torch.randn(b, h, n, d, device="cuda", dtype=dtype) for _ in range(4))
    scale = d**-0.5
    out, lse = triton_forward(q, k, v, args.causal, scale)

    def backward():
        return triton_backward(grad_out, q, k, v, out, lse, args.causal, scale)

    runs = {"forward": lambda: triton_forward(q, k, v, args.causal, scale), "dq": backward, "dkdv": backward}
    print(f"shape B={b} H={h} N={n} D={d} causal={args.causal} {args.dtype}; ms = do_bench median", flush=True)
    rows = []
    for name in args.kernels:
        chooser = CHOOSERS[name]
        default = default_tile(name, d, dtype, q.device, causal=args.causal, seq_len=seq_len_bucket(n))
        best = None
        for tile in candidate_tiles(name, d, dtype, q.device) + getattr(args, f"extra_{name}"):
            chooser.pinned = tile
            forward_plan.cache_clear()  # plans keep the tile they were built with
            backward_plan.cache_clear()
            start = time.perf_counter()
            try:
                runs[name]()
                torch.cuda.synchronize()
                compile_s = time.perf_counter() - start
                ms = triton.testing.do_bench(runs[name], warmup=25, rep=200, return_mode="median")
            except Exception as error:  # compile failures and resource limits are results here
                ms, compile_s, note = None, None, f"{type(error).__name__}: {str(error).splitlines()[0][:80]}"
            else:
                note = "default" if tile == default else ""
                if best is None or ms < best[1]:
                    best = (tile, ms)
            rows.append({"kernel": name, "tile": list(tile), "ms": ms, "compile_s": compile_s, "note": note})
            shown = f"{ms:8.3f} ms  (first run {compile_s:5.1f} s)" if ms is not None else f"{'-':>8}"
            print(f"  {name:8} {tuple(tile)!s:20} {shown}  {note}", flush=True)
        chooser.pinned = None
        forward_plan.cache_clear()
        backward_plan.cache_clear()
        print(f"  best {name}: {best}", flush=True)

    if args.out:
        with open(args.out, "w") as f:
            json.dump(
                {
                    "shape": args.shape,
                    "causal": args.causal,
                    "dtype": args.dtype,
                    "rows": rows,
                    "triton": triton.__version__,
                    "torch": torch.__version__,
                    "device": torch.cuda.get_device_name(),
                },
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
