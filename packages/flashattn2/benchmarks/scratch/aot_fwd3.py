"""Offline sm_90a compile of a Hopper forward module: python aot_fwd3.py MODULE D CAUSAL [REGS]."""
import importlib
import sys

sys.path.insert(0, "/tmp/aot")
import aot_compile

aot_compile.install()
import torch
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

name, d, causal = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
gf = importlib.import_module(name)
if len(sys.argv) > 4:
    gf.CONSUMER_REGS = gl.constexpr(int(sys.argv[4]))
b, h, n = 1, 2, 4096
q = torch.randn(b, h, n, d, dtype=torch.bfloat16)
bn = gf.KEYS_PER_TILE[d]
L = lambda blk: gl.NVMMASharedLayout.get_default_for(blk, gl.bfloat16)
qd = TensorDescriptor.from_tensor(q, [1, 1, 64, d], L([1, 1, 64, d]))
kd = TensorDescriptor.from_tensor(q, [1, 1, bn, d], L([1, 1, bn, d]))
args = [qd, kd, kd, qd, torch.zeros(b * h * n), torch.zeros(64, dtype=torch.int32), 100, h, 1, n, 4, 0.18]
consts = dict(CAUSAL=causal, NEGATIVE_SCALE=False, HEAD_DIM=d, BLOCK_N=bn)
k = gf._hopper_forward_kernel.warmup(*args, **consts, num_warps=4, grid=(132,))
print(name, d, consts, getattr(gf, "CONSUMER_REGS", None), k.metadata.shared, aot_compile.ptxas_report(k), flush=True)
import re
ptx = k.asm["ptx"]
print("setmaxnreg:", re.findall(r"setmaxnreg[^;]*", ptx), re.findall(r"\.maxnreg \d+", ptx), re.findall(r"\.reqntid \d+", ptx))
