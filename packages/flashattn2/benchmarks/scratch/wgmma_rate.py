"""scratch (v164): the tensor cores' rate per warpgroup product shape on an H100/H200. One or two 4-warp
programs per multiprocessor, each issuing chains of four M=64, K=64 bf16 products of width N (N = 32, 64, 128,
256) into one fp32 accumulator and waiting for each chain, with A from shared memory (SS) or registers (RS).
TFLOP/s from do_bench medians. python wgmma_rate.py [offline]"""
import json
import os
import sys

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma, warpgroup_mma_wait


@gluon.jit
def _rate_kernel(out, iters, N: gl.constexpr, RS: gl.constexpr):
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, N, 16])
    a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, 64], gl.bfloat16)
    b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, N], gl.bfloat16)
    a_smem = gl.allocate_shared_memory(gl.bfloat16, [64, 64], a_layout)
    b_smem = gl.allocate_shared_memory(gl.bfloat16, [64, N], b_layout)
    fill: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    a_smem.store(gl.full([64, 64], 0.01, gl.bfloat16, fill))
    b_smem.store(gl.full([64, N], 0.01, gl.bfloat16, fill))
    gl.thread_barrier()
    acc = gl.zeros([64, N], gl.float32, ACC)
    if RS:
        A_REG: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=ACC, k_width=2)
        a = a_smem.load(A_REG)
        for _ in range(iters):
            acc = warpgroup_mma(a, b_smem, acc, is_async=True)
            acc = warpgroup_mma(a, b_smem, acc, is_async=True)
            acc = warpgroup_mma(a, b_smem, acc, is_async=True)
            acc = warpgroup_mma(a, b_smem, acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    else:
        for _ in range(iters):
            acc = warpgroup_mma(a_smem, b_smem, acc, is_async=True)
            acc = warpgroup_mma(a_smem, b_smem, acc, is_async=True)
            acc = warpgroup_mma(a_smem, b_smem, acc, is_async=True)
            acc = warpgroup_mma(a_smem, b_smem, acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    total = gl.sum(gl.sum(acc, axis=1), axis=0)
    gl.store(out + gl.program_id(0), total)


def main():
    offline = sys.argv[1:2] == ["offline"]
    if offline:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import aot_compile

        aot_compile.install()
    device = "cpu" if offline else "cuda"
    sms = 132 if offline else torch.cuda.get_device_properties(0).multi_processor_count
    out = torch.zeros(3 * sms, device=device)
    rows = {}
    iters = 2000
    for per_sm in (1, 2, 3):
        for n in (32, 64, 128, 256):
            for rs in (False, True):
                programs = per_sm * sms
                if offline:
                    if per_sm == 1:
                        k = _rate_kernel.warmup(out, iters, N=n, RS=rs, num_warps=4, grid=(programs,))
                        print(n, rs, aot_compile.ptxas_report(k))
                    continue
                fn = lambda: _rate_kernel[(programs,)](out, iters, N=n, RS=rs, num_warps=4)  # noqa: E731
                fn()
                ms = triton.testing.do_bench(fn, warmup=30, rep=200, return_mode="median")
                tflops = 4 * iters * 2 * 64 * n * 64 * programs / ms / 1e9
                key = f"per_sm={per_sm} N={n} {'RS' if rs else 'SS'}"
                rows[key] = {"ms": ms, "tflops": tflops}
                print(f"{key:28} {ms:8.3f} ms {tflops:7.1f} TFLOP/s", flush=True)
    if not offline:
        json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "wgmma_rate.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
