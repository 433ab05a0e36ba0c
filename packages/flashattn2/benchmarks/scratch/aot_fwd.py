"""Offline sm_90a compile of the Hopper forward (the package's or MODULE's): python aot_fwd.py D CAUSAL [MODULE]."""
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import aot_compile

aot_compile.install()
import torch
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

d, causal = int(sys.argv[1]), sys.argv[2] == "1"
gf = importlib.import_module(sys.argv[3] if len(sys.argv) > 3 else "flashattn2._gluon_forward")
if False:
    gf.WAIT_PV.value = sys.argv[4] == "1"
b, h, n = 1, 2, 1024
q = torch.randn(b, h, n, d, dtype=torch.bfloat16)
bm, bn = gf.BLOCK_M.value, gf.KEYS_PER_TILE[d]
L = lambda blk: gl.NVMMASharedLayout.get_default_for(blk, gl.bfloat16)
qd = TensorDescriptor.from_tensor(q, [1, 1, bm, d], L([1, 1, bm, d]))
kd = TensorDescriptor.from_tensor(q, [1, 1, bn, d], L([1, 1, bn, d]))
lse = torch.zeros(b * h * n)
sched = torch.zeros(64, dtype=torch.int32)
items = -(-n // (2 * bm)) * b * h
args = [qd, kd, kd, qd, lse, sched, items, h, 1, n, 4, 0.125 * 1.4426950408889634]
k = gf._hopper_forward_kernel.warmup(*args, CAUSAL=causal, NEGATIVE_SCALE=False, HEAD_DIM=d, BLOCK_N=bn,
                                     num_warps=gf.NUM_WARPS.value, grid=(items,))
print(gf.__name__, d, causal, "shared", k.metadata.shared, aot_compile.ptxas_report(k), flush=True)
if os.environ.get("PTX_OUT"):
    open(os.environ["PTX_OUT"], "w").write(k.asm["ptx"])
