"""Offline (FakeDriver, sm_90a): does Triton 3.6 specialize a Gluon kernel on a TMA descriptor's shape or strides?
Four warmups of the Hopper backward kernel with descriptors of other shapes, batch sizes and a transposed layout;
the compile count stays 1 if not. Run from this folder: PYTHONPATH=../../src python spec_descriptors.py"""
import sys, os
sys.path.insert(0, ".")
import aot_compile
aot_compile.install()
import torch, triton
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
import flashattn2._gluon_backward as gb
count = []
triton.knobs.runtime.jit_post_compile_hook = lambda **kw: count.append(kw["fn"].name)
def args_for(qshape, qstride_perm=False):
    d = qshape[-1]
    q = torch.randn(*qshape, dtype=torch.bfloat16)
    if qstride_perm:
        q = torch.randn(qshape[0], qshape[2], qshape[1], d, dtype=torch.bfloat16).transpose(1, 2)
    b, h, n, _ = qshape
    lse = torch.randn(b * h * n)
    m, bn = gb.block_m(d), gb.block_n(d)
    L = lambda blk, dt=gl.bfloat16: gl.NVMMASharedLayout.get_default_for(blk, dt)
    row = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1)
    acc = torch.zeros(b, h, n, d)
    cnt = torch.zeros(64, dtype=torch.int32)
    return [TensorDescriptor.from_tensor(q, [1, 1, m, d], L([1, 1, m, d])),
        TensorDescriptor.from_tensor(q, [1, 1, bn, d], L([1, 1, bn, d])),
        TensorDescriptor.from_tensor(q, [1, 1, bn, d], L([1, 1, bn, d])),
        TensorDescriptor.from_tensor(q, [1, 1, m, d], L([1, 1, m, d])),
        TensorDescriptor.from_tensor(acc, [1, 1, 64, 64], L([1, 1, 64, 64], gl.float32)),
        TensorDescriptor.from_tensor(lse, [m], row), TensorDescriptor.from_tensor(lse, [m], row),
        q, q, TensorDescriptor.from_tensor(q, [1, 1, bn // 2, 64], L([1, 1, bn // 2, 64])),
        TensorDescriptor.from_tensor(q, [1, 1, bn // 2, 64], L([1, 1, bn // 2, 64])),
        cnt, cnt[-1:], torch.zeros(64, dtype=torch.int32), 64, 2, 1, 1024, 16, 8, 0.18, 0.125, 2*1024*64, 1024*64, 64]
consts = dict(CAUSAL=True, PERSISTENT=True, HEAD_DIM=64, PER_QUERY_HEAD=False, RAGGED=False)
for shape, perm in [((1, 2, 1024, 64), False), ((1, 2, 2048, 64), False), ((3, 2, 1024, 64), False), ((1, 2, 1024, 64), True)]:
    gb._hopper_backward_kernel.warmup(*args_for(shape, perm), **consts, num_warps=4, grid=(132,))
    print(shape, perm, len(count), flush=True)
