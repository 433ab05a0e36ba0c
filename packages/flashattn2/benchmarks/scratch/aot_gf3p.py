import sys
sys.path.insert(0, "/tmp/aot")
import aot_compile
aot_compile.install()
import re
import torch
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
import importlib, os; m = importlib.import_module(os.environ.get("MOD", "gf3p"))
if len(sys.argv) > 1:
    m.WORKER_REGS = gl.constexpr(int(sys.argv[1]))
if len(sys.argv) > 2:
    m.STAGES = gl.constexpr(int(sys.argv[2]))
b, h, n, d = 1, 2, 4096, 64
q = torch.randn(b, h, n, d, dtype=torch.bfloat16)
L = lambda blk: gl.NVMMASharedLayout.get_default_for(blk, gl.bfloat16)
qd = TensorDescriptor.from_tensor(q, [1, 1, 64, d], L([1, 1, 64, d]))
kd = TensorDescriptor.from_tensor(q, [1, 1, 128, d], L([1, 1, 128, d]))
k = m._kernel.warmup(qd, kd, kd, qd, torch.zeros(b * h * n), 100, h, 1, n, 0.18, HEAD_DIM=d, BN=128, num_warps=4, grid=(132,))
ptx = k.asm["ptx"]
print(sys.argv[1:], k.metadata.shared, aot_compile.ptxas_report(k), re.findall(r"setmaxnreg[^;]*", ptx)[:6], re.findall(r"\.maxnreg \d+", ptx))
