"""Compile the package's Hopper backward for sm_90a without a GPU: python aot_pkg.py CAUSAL HEAD_DIM (triton 3.6 venv)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import aot_compile; aot_compile.install()
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

import flashattn2._gluon_backward as gb

causal, d = (int(x) for x in sys.argv[1:3])
b, h, n = 1, 2, 384
q = torch.randn(b, h, n, d, dtype=torch.bfloat16)
lse = torch.randn(b * h * n)
hb = gb.HopperBackward(q.shape, q.shape, q.stride(), q.stride(), torch.bfloat16, torch.device("cpu"), bool(causal), 0.125)
m, bn, half, lay = 64, 128, d // 2, hb.layouts
acc = torch.zeros(hb.acc_shape)
cnt = torch.zeros(10, dtype=torch.int32)
k = gb._hopper_backward_kernel.warmup(
    TensorDescriptor.from_tensor(q, [1, 1, m, d], lay["m"]), TensorDescriptor.from_tensor(q, [1, 1, bn, d], lay["n"]),
    TensorDescriptor.from_tensor(q, [1, 1, bn, d], lay["n"]), TensorDescriptor.from_tensor(q, [1, 1, m, d], lay["m"]),
    TensorDescriptor.from_tensor(q, [1, 1, bn, half], lay["n_half"]), TensorDescriptor.from_tensor(acc, [1, 1, m, half], lay["dq"]),
    TensorDescriptor.from_tensor(lse, [m], lay["row"]), TensorDescriptor.from_tensor(lse, [m], lay["row"]),
    q, q, cnt, cnt[-1:], *hb.scalars, *q.stride()[:3], CAUSAL=bool(causal), HEAD_DIM=d, num_warps=gb.NUM_WARPS, grid=hb.grid)
print(sys.argv[1:3], k.metadata.shared, aot_compile.ptxas_report(k), flush=True)
if len(sys.argv) > 3:
    open(sys.argv[3], "w").write(k.asm["ttgir"])
    open(sys.argv[3] + ".ptx", "w").write(k.asm["ptx"])
