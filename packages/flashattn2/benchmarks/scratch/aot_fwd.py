"""scratch (v178): forward variants compiled offline for sm_90a (offline_compile's driver)."""

import importlib
import os

import torch
from offline_compile import H100_L2_BYTES, H100_MULTIPROCESSORS, Sm90Driver, ptxas_report, resource_usage
from triton.runtime import driver

driver.set_active(Sm90Driver())
from flashattn2 import _hopper, _launch  # noqa: E402 (after the driver)

_hopper.usable_multiprocessors = lambda device: H100_MULTIPROCESSORS
_hopper.fits_in_l2 = lambda nbytes, share, device: nbytes <= share * H100_L2_BYTES
_launch.fits_in_l2 = _hopper.fits_in_l2
cpu, dtype = torch.device("cpu"), torch.bfloat16
for name in os.environ.get("MODS", "flashattn2._gluon_forward").split():
    mod = importlib.import_module(name)
    for shape, causal in (((1, 16, 16384, 64), True), ((1, 16, 16384, 64), False), ((4, 16, 2048, 64), True)):
        fwd = mod.HopperForward(shape, shape, dtype, cpu, causal, 0.125)
        q, k, v, out = (describe.stand_in(dtype, cpu) for describe in fwd.descriptors)
        lse, schedule = torch.empty(16), torch.empty(16, dtype=torch.int32)
        fwd.kernel.compile_in_background(q, k, v, out, lse, schedule)
        try:
            kernel = fwd.kernel.compiling[1].result()
        except Exception as failure:
            print(name, shape, causal, "ERROR", repr(failure)[-600:], flush=True)
            continue
        print(name, shape, "causal" if causal else "full", "three" if fwd.three_consumers else "two",
              resource_usage(kernel), ptxas_report(kernel), flush=True)
