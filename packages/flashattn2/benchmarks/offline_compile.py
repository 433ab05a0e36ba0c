"""Compile the Hopper kernels for sm_90a with whatever Triton is installed, on a machine without a GPU.

Usage (any Linux machine with torch and Triton, repository root)::

    PYTHONPATH=packages/flashattn2/src python packages/flashattn2/benchmarks/offline_compile.py --out compile.json

For each shape and mask of a built-in list or of ``--shapes`` (bf16), the Hopper forward's kernel and the Hopper
backward's kernels (its prologue, main kernel, epilogue and, with grouped-query heads, the group sum) are compiled as
the launch plans would compile them on an H100 (132 multiprocessors, 50 MiB of L2): Triton's active driver is
replaced by one that names an sm_90a target, so kernels compile to PTX and a cubin and never run. Each kernel's
shared memory, the registers, stack and local memory of the cubin Triton built (cuobjdump), and the serialization
warnings (C7510-C7520: products made synchronous) that the release's own ptxas reports with ``-v``, or the error
that stopped the compile, are printed and written to ``--out``. ``--dump DIR`` keeps each kernel's PTX and TTGIR
there; ``--forward-only`` and ``--backward-only`` compile one of the two. This is the first check of a new Triton
release before it is measured on a GPU (NOTES v165): whether the kernels compile at all, and whether ptxas spills or
serializes where it did not.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
import traceback

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.runtime import driver

# (q shape (B, H, N, D), k/v heads, causal): the matrix's Hopper shapes and a non-causal head-dim-64 one
SHAPES = [
    ((1, 16, 16384, 64), 16, True),
    ((1, 16, 16384, 64), 16, False),
    ((4, 16, 4096, 64), 16, False),
    ((4, 16, 4096, 128), 16, True),
    ((4, 16, 4096, 128), 16, False),
    ((2, 32, 4096, 128), 8, True),
    ((2, 16, 4096, 256), 16, True),
    ((2, 16, 4096, 256), 16, False),
]
H100_MULTIPROCESSORS, H100_L2_BYTES = 132, 50 * 2**20


class Sm90Driver:
    """Stands in for Triton's CUDA driver where no GPU is: the current target is sm_90a, tensors are on the CPU."""

    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_active_torch_device(self):
        return torch.device("cpu")


def ptxas_report(kernel) -> list[str]:
    """The lines of ``ptxas -v`` (the one the release compiles sm_90a with) on the kernel's PTX that name
    registers, spills or a serialization warning: run again without the flags Triton adds (``-lineinfo``, and from
    3.9 ``--regAllocOptLevel=2``), for the warnings, which the cubin does not keep; its spills can differ from the
    cubin's (:func:`resource_usage`)."""
    from triton.backends.nvidia.compiler import get_ptxas

    ptxas = get_ptxas(90).path
    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "kernel.ptx")
        with open(source, "w") as f:
            f.write(kernel.asm["ptx"])
        command = [ptxas, "-v", "--gpu-name", "sm_90a", source, "-o", os.path.join(folder, "kernel.o")]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = result.stderr.strip().splitlines()
    return [line.split("info    : ")[-1].strip() for line in lines if any(k in line for k in ("C75", "spill", "Used"))]


def resource_usage(kernel) -> str:
    """The compiled cubin's registers, stack, shared and local memory as cuobjdump reports them: the cubin Triton
    built, with the ptxas flags of its release (the driver's local memory per thread, which the GPU tests read, is
    the stack plus the local memory)."""
    from triton import knobs

    with tempfile.TemporaryDirectory() as folder:
        cubin = os.path.join(folder, "kernel.cubin")
        with open(cubin, "wb") as f:
            f.write(kernel.asm["cubin"])
        command = [knobs.nvidia.cuobjdump.path, "--dump-resource-usage", cubin]
        report = subprocess.run(command, capture_output=True, text=True, check=False).stdout
    found = re.search(r"REG:\d+ STACK:\d+ SHARED:\d+ LOCAL:\d+", report)
    return found.group(0) if found else report.strip()


def compile_all(dump: str | None, shapes=SHAPES, forward_only: bool = False, backward_only: bool = False) -> list[dict]:
    """Every kernel of every ``shapes`` entry ((B, H, N, D), k/v heads, causal), or only the forward's or the
    backward's, compiled: one row each."""
    driver.set_active(Sm90Driver())
    from flashattn2 import _hopper, _launch  # after the driver: nothing of theirs asks it at import

    _hopper.usable_multiprocessors = lambda device: H100_MULTIPROCESSORS
    _hopper.fits_in_l2 = lambda nbytes, share, device: nbytes <= share * H100_L2_BYTES
    _launch.fits_in_l2 = _hopper.fits_in_l2
    from flashattn2 import _gluon_backward, _gluon_forward

    rows = []
    cpu, dtype, scale = torch.device("cpu"), torch.bfloat16, 0.125
    for q_shape, kv_heads, causal in shapes:
        q_shape = tuple(q_shape)
        k_shape = (q_shape[0], kv_heads, *q_shape[2:])
        launches = []  # (launch, what its row also says)
        if not backward_only:
            forward = _gluon_forward.HopperForward(q_shape, k_shape, dtype, cpu, causal, scale)
            q, k, v, out = (describe.stand_in(dtype, cpu) for describe in forward.descriptors)
            lse, schedule = torch.empty(16), torch.empty(16, dtype=torch.int32)
            forward.kernel.compile_in_background(q, k, v, out, lse, schedule)
            launches.append((forward.kernel, {"three_consumers": forward.three_consumers}))
        if not forward_only:
            strides = torch.empty(q_shape, device="meta").stride()
            backward = _gluon_backward.HopperBackward(q_shape, k_shape, strides, strides, dtype, cpu, causal, scale)
            backward.compile_early()
            kernels = (backward.prologue, backward.kernel, backward.epilogue, backward.group_sum)
            launches += [(launch, {}) for launch in kernels]
        for launch, details in launches:
            if launch.compiling is None:  # the group sum, without grouped-query heads
                continue
            name = launch.fn.__name__
            row = {"shape": q_shape, "kv_heads": kv_heads, "causal": causal, "kernel": name, **details}
            row["constexprs"] = launch.constexprs
            try:
                kernel = launch.compiling[1].result()
            except Exception as failure:
                row["error"] = "".join(traceback.format_exception(failure))
                summary = row["error"].strip().splitlines()[-1]
            else:
                row.update(shared=kernel.metadata.shared, ptxas=ptxas_report(kernel), cubin=resource_usage(kernel))
                summary = [row["cubin"], *row["ptxas"]]
                if dump:
                    tag = f"{'x'.join(map(str, q_shape))}_kv{kv_heads}_{'causal' if causal else 'full'}_{name}"
                    for kind in ("ptx", "ttgir"):
                        with open(os.path.join(dump, f"{tag}.{kind}"), "w") as f:
                            f.write(kernel.asm[kind])
            rows.append(row)
            print(q_shape, kv_heads, "causal" if causal else "full", name, row.get("shared", ""), summary, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the rows as JSON here")
    parser.add_argument("--dump", help="keep each kernel's PTX and TTGIR in this folder")
    shapes_help = "JSON list of [[B, H, N, D], k/v heads, causal]"
    parser.add_argument("--shapes", type=json.loads, default=SHAPES, help=shapes_help)
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--forward-only", action="store_true", help="compile only the forward's kernel")
    only.add_argument("--backward-only", action="store_true", help="compile only the backward's kernels")
    args = parser.parse_args()
    if args.dump:
        os.makedirs(args.dump, exist_ok=True)
    rows = compile_all(args.dump, args.shapes, args.forward_only, args.backward_only)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"triton": triton.__version__, "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
