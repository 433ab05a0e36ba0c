"""scratch (v170): the gb_rs_* backward variants compiled offline for sm_90a (offline_compile's stand-in driver):
registers, spills and serialization warnings of the main kernel, beside the package's.

    PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks:packages/flashattn2/benchmarks/scratch \
        python packages/flashattn2/benchmarks/scratch/aot_rs.py [--dump DIR]
"""

import importlib
import os
import sys

import torch
from offline_compile import H100_L2_BYTES, H100_MULTIPROCESSORS, Sm90Driver, ptxas_report, resource_usage
from triton.runtime import driver

driver.set_active(Sm90Driver())
from flashattn2 import _hopper, _launch  # noqa: E402 (after the driver)

_hopper.usable_multiprocessors = lambda device: H100_MULTIPROCESSORS
_hopper.fits_in_l2 = lambda nbytes, share, device: nbytes <= share * H100_L2_BYTES
_launch.fits_in_l2 = _hopper.fits_in_l2
dump = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "--dump" else None
for name in os.environ.get("MODS", "flashattn2._gluon_backward gb_rs_dk gb_rs_kv gb_rs_both").split():
    mod = importlib.import_module(name)
    for shape, causal in (((1, 16, 16384, 64), True), ((1, 16, 16384, 64), False), ((4, 16, 4096, 128), True)):
        strides = torch.empty(shape, device="meta").stride()
        bwd = mod.HopperBackward(shape, shape, strides, strides, torch.bfloat16, torch.device("cpu"), causal, 0.125)
        bwd.compile_early()
        try:
            k = bwd.kernel.compiling[1].result()
        except Exception as failure:
            print(name, shape[-1], causal, "ERROR", str(failure).strip().splitlines()[-1][:400], flush=True)
            continue
        ptx = k.asm["ptx"]
        print(name, shape[-1], "causal" if causal else "full", resource_usage(k), ptxas_report(k),
              "wgmma", ptx.count("wgmma.mma_async"), "bar.sync", ptx.count("bar.sync"), flush=True)
        if dump:
            os.makedirs(dump, exist_ok=True)
            open(os.path.join(dump, f"{name.split('.')[-1]}_{shape[-1]}_{int(causal)}.ptx"), "w").write(ptx)
