"""Offline sm_90a compile of the package's Hopper kernels with whatever Triton is installed (no GPU needed):
python aot_package.py [forward|backward|all]. Prints each kernel's shared memory, registers, spills and ptxas
serialization warnings, or the error that stopped its compile."""
import os
import subprocess
import sys
import tempfile
import traceback

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.runtime import driver


class FakeDriver:
    def __init__(self):
        self.target = GPUTarget("cuda", 90, 32)

    def get_current_target(self):
        return self.target

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_active_torch_device(self):
        return torch.device("cpu")


driver.set_active(FakeDriver())

from flashattn2 import _hopper, _launch  # noqa: E402

_hopper.usable_multiprocessors = lambda device: 132
_hopper.multiprocessors = lambda device: 132
_hopper.fits_in_l2 = lambda nbytes, share, device: nbytes <= share * 50 * 2**20
_launch.fits_in_l2 = _hopper.fits_in_l2
_launch.on_its_device = lambda fn, device: fn()
from flashattn2 import _gluon_backward, _gluon_forward  # noqa: E402

compiled = []


def synchronous(self, *tensors):
    try:
        k = self.fn.warmup(*tensors, *self.scalars, **self.constexprs, **self._options(), grid=self.grid)
        compiled.append((self.fn.__name__, self.constexprs, k, None))
    except Exception as e:
        compiled.append((self.fn.__name__, self.constexprs, None, "".join(traceback.format_exception_only(e))[-3000:]))


_launch.CompiledLaunch.compile_in_background = synchronous


def ptxas_report(kernel):
    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/ptxas")
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "k.ptx")
        open(p, "w").write(kernel.asm["ptx"])
        r = subprocess.run([ptxas, "-v", "--gpu-name", "sm_90a", p, "-o", os.path.join(d, "k.o")], capture_output=True, text=True)
    return [l.split("info    : ")[-1] for l in r.stderr.strip().splitlines() if "C75" in l or "spill" in l or "Used" in l]


cpu = torch.device("cpu")
dt = torch.bfloat16
which = sys.argv[1] if len(sys.argv) > 1 else "all"
shapes = [((1, 16, 16384, 64), 16, True), ((1, 16, 16384, 64), 16, False), ((4, 16, 4096, 128), 16, True),
          ((4, 16, 4096, 128), 16, False), ((2, 16, 4096, 256), 16, True), ((2, 16, 4096, 256), 16, False),
          ((4, 16, 4096, 64), 16, False), ((2, 32, 4096, 128), 8, True)]
for q_shape, kv_heads, causal in shapes:
    k_shape = (q_shape[0], kv_heads, *q_shape[2:])
    compiled.clear()
    if which in ("forward", "all"):
        f = _gluon_forward.HopperForward(q_shape, k_shape, dt, cpu, causal, 0.125)
        descs = [f.q_descriptors[0].stand_in(dt, cpu), f.q_descriptors[1].stand_in(dt, cpu),
                 f.kv_descriptors[0].stand_in(dt, cpu), f.kv_descriptors[1].stand_in(dt, cpu),
                 f.out_descriptors[0].stand_in(dt, cpu), f.out_descriptors[1].stand_in(dt, cpu),
                 torch.empty(16), torch.empty(16, dtype=torch.int32)]
        synchronous(f.kernel, *descs)
    if which in ("backward", "all"):
        stride = torch.empty(q_shape).stride()
        b = _gluon_backward.HopperBackward(q_shape, k_shape, stride, stride, dt, cpu, causal, 0.125)
        b.compile_early()
    for name, consts, k, err in compiled:
        head = f"{q_shape} kv={kv_heads} causal={causal} {name} {consts}"
        if err:
            print(head, "ERROR", err, flush=True)
        else:
            print(head, "shared", k.metadata.shared, ptxas_report(k), flush=True)
            if os.environ.get("DUMP_DIR"):
                tag = f"{'x'.join(map(str, q_shape))}_kv{kv_heads}_c{int(causal)}_{name}"
                for ext in ("ptx", "ttgir"):
                    with open(os.path.join(os.environ["DUMP_DIR"], f"{tag}.{ext}"), "w") as out:
                        out.write(k.asm[ext])
