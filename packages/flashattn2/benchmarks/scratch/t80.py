import aot_compile; aot_compile.install()
import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma, warpgroup_mma_wait, fence_async_shared

@gluon.jit
def k(out):
    lay: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 80, 16])
    a_s = gl.allocate_shared_memory(gl.bfloat16, [64, 128], gl.NVMMASharedLayout.get_default_for([64, 128], gl.bfloat16))
    b_s = gl.allocate_shared_memory(gl.bfloat16, [80, 128], gl.NVMMASharedLayout.get_default_for([80, 128], gl.bfloat16))
    acc = gl.zeros([64, 80], gl.float32, lay)
    acc = warpgroup_mma(a_s, b_s.permute((1, 0)), acc, is_async=True)
    acc = warpgroup_mma_wait(0, deps=(acc,))
    s = gl.sum(acc, axis=0)
    offs = gl.arange(0, 80, layout=gl.SliceLayout(0, lay))
    gl.store(out + offs, s)

x = torch.empty(80)
kk = k.warmup(x, grid=(1,), num_warps=4)
print(aot_compile.ptxas_report(kk))
