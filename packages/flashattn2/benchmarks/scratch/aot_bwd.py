"""Offline sm_90a compile of the package's Hopper backward kernel (or MODULE's): python aot_bwd.py D CAUSAL [MODULE]."""
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
gb = importlib.import_module(sys.argv[3] if len(sys.argv) > 3 else "flashattn2._gluon_backward")
b, h, n = 1, 2, 1024
q = torch.randn(b, h, n, d, dtype=torch.bfloat16)
lse = torch.randn(b * h * n)
m = gb.block_m(d)
bn = gb.block_n(d) if hasattr(gb, "block_n") else gb.BLOCK_N.value
L = lambda blk, dt=gl.bfloat16: gl.NVMMASharedLayout.get_default_for(blk, dt)
row = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1)
acc = torch.zeros(b, h, n, d)
cnt = torch.zeros(h * n + 8, dtype=torch.int32)
qt, kt = -(-n // m), -(-n // bn)
args = [TensorDescriptor.from_tensor(q, [1, 1, m, d], L([1, 1, m, d])),
        TensorDescriptor.from_tensor(q, [1, 1, bn, d], L([1, 1, bn, d])),
        TensorDescriptor.from_tensor(q, [1, 1, bn, d], L([1, 1, bn, d])),
        TensorDescriptor.from_tensor(q, [1, 1, m, d], L([1, 1, m, d])),
        TensorDescriptor.from_tensor(acc, [1, 1, 64, 64], L([1, 1, 64, 64], gl.float32)),
        TensorDescriptor.from_tensor(lse, [m], row), TensorDescriptor.from_tensor(lse, [m], row),
        q, q, TensorDescriptor.from_tensor(q, [1, 1, bn // 2, 64], L([1, 1, bn // 2, 64])),
        TensorDescriptor.from_tensor(q, [1, 1, bn // 2, 64], L([1, 1, bn // 2, 64])),
        cnt, cnt[-1:], torch.zeros(64, dtype=torch.int32), kt * b * h, h, 1, n, qt, kt,
        0.125 * 1.4426950408889634, 0.125, *q.stride()[:3]]
extra = dict(a.split("=") for a in sys.argv[4:])
consts = dict(CAUSAL=causal, PERSISTENT=extra.get("P", "1") == "1", HEAD_DIM=d, PER_QUERY_HEAD=extra.get("G", "0") == "1", RAGGED=extra.get("R", "0") == "1")
k = gb._hopper_backward_kernel.warmup(*args, **consts, num_warps=gb.NUM_WARPS, grid=(132,))
print(gb.__name__, d, causal, "shared", k.metadata.shared, aot_compile.ptxas_report(k), flush=True)
open(f"/tmp/aot_{gb.__name__.split('.')[-1]}_{d}_{int(causal)}.ptx", "w").write(k.asm["ptx"])
