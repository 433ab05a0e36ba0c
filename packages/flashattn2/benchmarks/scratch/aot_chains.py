"""Offline sm_90a compile of a Hopper backward module's kernel: python aot_chains.py MODULE CHAINS [D]."""
import importlib
import sys

sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
import aot_compile

aot_compile.install()
import torch
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

name, chains = sys.argv[1], int(sys.argv[2])
d = int(sys.argv[3]) if len(sys.argv) > 3 else 64
gb = importlib.import_module(name)
b, h, n = 1, 2, 1024
q = torch.randn(b, h, n, d, dtype=torch.bfloat16)
lse = torch.randn(b * h * n)
m, bn, sm, dqc = gb.block_m(d), gb.BLOCK_N.value, gb.SUB_M.value, gb.DQ_COLS.value
L = lambda blk, dt=gl.bfloat16: gl.NVMMASharedLayout.get_default_for(blk, dt)
row = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1)
acc = torch.zeros(b * max(chains, 1), h, n, d)
cnt = torch.zeros(h * n + 8, dtype=torch.int32)
qt, kt = -(-n // m), -(-n // bn)
args = [TensorDescriptor.from_tensor(q, [1, 1, m, d], L([1, 1, m, d])),
        TensorDescriptor.from_tensor(q, [1, 1, bn, d], L([1, 1, bn, d])),
        TensorDescriptor.from_tensor(q, [1, 1, bn, d], L([1, 1, bn, d])),
        TensorDescriptor.from_tensor(q, [1, 1, m, d], L([1, 1, m, d])),
        TensorDescriptor.from_tensor(acc, [1, 1, sm, dqc], L([1, 1, sm, dqc], gl.float32)),
        TensorDescriptor.from_tensor(lse, [m], row), TensorDescriptor.from_tensor(lse, [m], row),
        q, q, TensorDescriptor.from_tensor(q, [1, 1, 64, 64], L([1, 1, 64, 64])),
        TensorDescriptor.from_tensor(q, [1, 1, 64, 64], L([1, 1, 64, 64])),
        cnt, cnt[-1:], torch.zeros(64, dtype=torch.int32), kt * b * h, h, 1, n, qt, kt,
        0.125 * 1.4426950408889634, 0.125, *q.stride()[:3]]
consts = dict(CAUSAL=True, PERSISTENT=True, HEAD_DIM=d, PER_QUERY_HEAD=False, RAGGED=False)
if "chain_tiles" in gb._hopper_backward_kernel.arg_names:
    args.append(-(-kt // chains)); consts["CHAINS"] = chains
k = gb._hopper_backward_kernel.warmup(*args, **consts, num_warps=gb.NUM_WARPS, grid=(132,))
print(name, chains, d, k.metadata.shared, aot_compile.ptxas_report(k), flush=True)
print(len(k.asm["ptx"]), "characters of PTX")
