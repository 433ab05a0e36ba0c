"""scratch (v174): forward variants compiled offline for sm_90a beside the package's (offline_compile's driver)."""

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
def _innermost(e):
    while (e.__cause__ or e.__context__) is not None:
        e = e.__cause__ or e.__context__
    return repr(e)[-800:]


for name in os.environ.get("MODS", "flashattn2._gluon_forward gf_three4").split():
    mod = importlib.import_module(name)
    for shape, causal in (((1, 16, 16384, 64), True), ((1, 16, 16384, 64), False), ((4, 16, 2048, 64), True)):
        fwd = mod.HopperForward(shape, shape, dtype, cpu, causal, 0.125)
        q_first, q_last = (describe.stand_in(dtype, cpu) for describe in fwd.q_descriptors)
        k, v = (describe.stand_in(dtype, cpu) for describe in fwd.kv_descriptors)
        out_first, out_last = (describe.stand_in(dtype, cpu) for describe in fwd.out_descriptors)
        lse, schedule = torch.empty(16), torch.empty(16, dtype=torch.int32)
        fwd.kernel.compile_in_background(q_first, q_last, k, v, out_first, out_last, lse, schedule)
        try:
            kernel = fwd.kernel.compiling[1].result()
        except Exception as failure:
            print(name, shape, causal, "ERROR", _innermost(failure), flush=True)
            continue
        ptx = kernel.asm["ptx"]
        if os.environ.get("DUMP"):
            tag = f"{name.split('.')[-1]}_{shape[2]}_{int(causal)}"
            open(os.path.join(os.environ["DUMP"], tag + ".ptx"), "w").write(ptx)
        print(name, shape, "causal" if causal else "full", "three" if fwd.three_consumers else "two",
              resource_usage(kernel), ptxas_report(kernel), "bar.sync", ptx.count("bar.sync"), flush=True)
