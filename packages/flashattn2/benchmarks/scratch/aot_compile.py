"""A stand-in Triton driver for sm_90a on a machine without a GPU: kernels compile (TTGIR, PTX, cubin) but cannot run."""
import os
import subprocess
import tempfile

from triton.backends.compiler import GPUTarget
from triton.runtime import driver


class FakeDriver:
    def __init__(self, arch=90):
        self.target = GPUTarget("cuda", arch, 32)

    def get_current_target(self):
        return self.target

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_active_torch_device(self):
        import torch

        return torch.device("cpu")


def install(arch=90):
    driver.set_active(FakeDriver(arch))


def ptxas_report(kernel):
    """Registers, spills and serialization warnings of a compiled kernel, from ptxas -v on its PTX."""
    import triton

    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/ptxas")
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "k.ptx")
        open(p, "w").write(kernel.asm["ptx"])
        r = subprocess.run([ptxas, "-v", "--gpu-name", "sm_90a", p, "-o", os.path.join(d, "k.o")], capture_output=True, text=True)
    lines = r.stderr.strip().splitlines()
    return [l for l in lines if "C75" in l or "spill" in l or "Used" in l]
