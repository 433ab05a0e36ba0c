"""gl.bank_conflicts of the Hopper backward's shared-memory stores and loads (offline, sm_90a): the dQ accumulator
into the 128-, 64- and 32-byte-swizzled fp32 buffer, dQ^T into its transposed view, the dS store, the L/Delta loads."""
import sys
sys.path.insert(0, "/work/main/packages/flashattn2/benchmarks/scratch")
import aot_compile
aot_compile.install()
import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def k(x, D: gl.constexpr):
    st_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16])
    dq_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16])
    dq = gl.zeros([64, 64], gl.float32, dq_layout)
    dq_smem = gl.allocate_shared_memory(gl.float32, [64, 64], gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2))
    gl.static_print("dq store fp32 128B swizzle:", gl.bank_conflicts(dq.type, dq_smem.type))
    s2 = gl.allocate_shared_memory(gl.float32, [64, 64], gl.NVMMASharedLayout(swizzle_byte_width=64, element_bitwidth=32, rank=2))
    gl.static_print("dq store fp32 swizzle 64", gl.bank_conflicts(dq.type, s2.type))
    s3 = gl.allocate_shared_memory(gl.float32, [64, 64], gl.NVMMASharedLayout(swizzle_byte_width=32, element_bitwidth=32, rank=2))
    gl.static_print("dq store fp32 swizzle 32", gl.bank_conflicts(dq.type, s3.type))
    dst = gl.zeros([64, 64], gl.bfloat16, st_layout)
    BM: gl.constexpr = 64 if D == 128 else 128
    ds_smem = gl.allocate_shared_memory(gl.bfloat16, [64, BM], gl.NVMMASharedLayout.get_default_for([128, BM], gl.bfloat16))
    if BM == 64:
        gl.static_print("dS store bf16 (D=128):", gl.bank_conflicts(dst.type, ds_smem.type))
    col: gl.constexpr = gl.SliceLayout(0, st_layout)
    v = gl.zeros([64], gl.float32, col)
    ld = gl.allocate_shared_memory(gl.float32, [64], gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1))
    gl.static_print("L/Delta load:", gl.bank_conflicts(v.type, ld.type))
    gl.store(x + gl.arange(0, 64, layout=col), v)


x = torch.zeros(64)
k.warmup(x, 128, grid=(1,), num_warps=4)
@gluon.jit
def k2(x):
    dq_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16])
    dqt = gl.zeros([64, 64], gl.float32, dq_layout)
    s128 = gl.allocate_shared_memory(gl.float32, [64, 64], gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2))
    gl.static_print("dq^T into permuted 128B:", gl.bank_conflicts(dqt.type, s128.permute((1, 0)).type))
    s128t = gl.allocate_shared_memory(gl.float32, [64, 64], gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2, transposed=True))
    gl.static_print("dq into transposed 128B:", gl.bank_conflicts(dqt.type, s128t.type))
    b2: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    y = gl.zeros([64, 64], gl.float32, b2)
    gl.static_print("blocked [1,4] into 128B:", gl.bank_conflicts(y.type, s128.type))
    gl.store(x + gl.arange(0, 64, layout=gl.SliceLayout(0, dq_layout)), gl.sum(dqt, 0))



k2.warmup(x, grid=(1,), num_warps=4)
