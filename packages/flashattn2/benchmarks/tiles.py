"""Time every tile configuration of each flashattn2 kernel at one shape, one kernel at a time.

Usage (on a CUDA GPU, from the repository root)::

    PYTHONPATH=packages/flashattn2/src python packages/flashattn2/benchmarks/tiles.py \
        --shape 1 16 16384 64 --causal --extra-dkdv 128,128,8,2 --out tiles.json

The autotuner picks the fastest configuration but does not show the others; this
script does, so that a change of tile lists is made on numbers. For the forward
kernel, and for the backward with the dK/dV or the dQ kernel's configuration
varied (the other kernel at its list's first entry), each configuration runs
alone (the autotuner's list is replaced by that one configuration) and is timed
with ``triton.testing.do_bench`` (median). Backward times include the Delta
kernel. Configurations that fail to compile or run out of shared memory are
reported as such. Last, a torch.profiler split of one forward+backward at the
lists' first entries (the configuration used when ``FLASHATTN2_AUTOTUNE=0``).
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
import triton
from torch.profiler import ProfilerActivity, profile

from flashattn2 import _triton_backward, _triton_forward
from flashattn2._triton_backward import triton_backward
from flashattn2._triton_common import configs_for
from flashattn2._triton_forward import triton_forward

KERNELS = {  # name -> (the launcher that remembers the autotuned kernel's choices, its GPU tile list)
    "forward": (_triton_forward.launch_forward, _triton_forward._GPU_TILES),
    "dkdv": (_triton_backward.launch_dkdv, _triton_backward._DKDV_GPU_TILES),
    "dq": (_triton_backward.launch_dq, _triton_backward._DQ_GPU_TILES),
}


def parse_tile(text: str) -> tuple[int, int, int, int]:
    block_m, block_n, warps, stages = (int(x) for x in text.split(","))
    return block_m, block_n, warps, stages


def pin(name: str, tile) -> None:
    """Make kernel ``name`` run only ``tile`` from now on (and forget earlier tunings)."""
    launcher, _ = KERNELS[name]
    launcher.kernel.configs = configs_for([tile])
    launcher.kernel.cache.clear()
    launcher.forget()


def time_ms(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=4, metavar=("B", "H", "N", "D"), default=[1, 16, 16384, 64])
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    for name in KERNELS:
        parser.add_argument(f"--extra-{name}", type=parse_tile, nargs="*", default=[],
                            metavar="M,N,WARPS,STAGES", help=f"tiles to try besides the {name} list")
    parser.add_argument("--out", help="write the table as JSON here")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2

    b, h, n, d = args.shape
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    q, k, v, grad_out = (torch.randn(b, h, n, d, device="cuda", dtype=dtype) for _ in range(4))
    scale = d**-0.5
    defaults = {name: tiles[0] for name, (_, tiles) in KERNELS.items()}
    for name in KERNELS:
        pin(name, defaults[name])
    out, lse = triton_forward(q, k, v, args.causal, scale)

    def backward():
        return triton_backward(grad_out, q, k, v, out, lse, args.causal, scale)

    runs = {"forward": lambda: triton_forward(q, k, v, args.causal, scale), "dkdv": backward, "dq": backward}
    rows = []
    print(f"shape B={b} H={h} N={n} D={d} causal={args.causal} {args.dtype}; ms = do_bench median", flush=True)
    for name, (_, tiles) in KERNELS.items():
        best = None
        for tile in list(tiles) + getattr(args, f"extra_{name}"):
            pin(name, tile)
            try:
                ms = time_ms(runs[name])
            except Exception as error:  # compile failures and resource limits are results here
                ms, note = None, f"{type(error).__name__}: {str(error).splitlines()[0][:80]}"
            else:
                note = ""
                if best is None or ms < best[1]:
                    best = (tile, ms)
            rows.append({"kernel": name, "tile": tile, "ms": ms, "note": note})
            shown = f"{ms:8.3f}" if ms is not None else "       -"
            print(f"  {name:8} {str(tile):22} {shown}  {note}", flush=True)
        pin(name, defaults[name])
        print(f"  best {name}: {best}", flush=True)

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            o, l = triton_forward(q, k, v, args.causal, scale)
            triton_backward(grad_out, q, k, v, o, l, args.causal, scale)
        torch.cuda.synchronize()
    split = {}
    for event in prof.key_averages():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            split[event.key] = event.device_time_total / 3 / 1e3  # ms per forward+backward
    print("per-kernel ms at the default tiles:", json.dumps(split, indent=1), flush=True)

    if args.out:
        with open(args.out, "w") as f:
            json.dump({"shape": args.shape, "causal": args.causal, "dtype": args.dtype,
                       "rows": rows, "profile_ms": split, "triton": triton.__version__,
                       "torch": torch.__version__, "device": torch.cuda.get_device_name()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
