"""scratch (v146): can one warpgroup's exponentials (MUFU.EX2) run while another warpgroup's products run on the
tensor cores? One program per multiprocessor, two 4-warp partitions: the default issues chains of four
64 x 128 x 64 bf16 products from shared memory and waits for each chain; the worker computes exp2 over a
64 x 128 fp32 tile per iteration. MODE 0: both; 1: products only; 2: exponentials only. Timed by do_bench.
python mufu_overlap.py [offline]"""
import json
import os
import sys

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma, warpgroup_mma_wait



@gluon.jit
def _products(a_smem, b_smem, out, iters, MODE: gl.constexpr):
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 128, 16])
    acc = gl.zeros([64, 128], gl.float32, ACC)
    if MODE != 2:
        for _ in range(iters):
            acc = warpgroup_mma(a_smem, b_smem, acc, is_async=True)
            acc = warpgroup_mma(a_smem, b_smem, acc, is_async=True)
            acc = warpgroup_mma(a_smem, b_smem, acc, is_async=True)
            acc = warpgroup_mma(a_smem, b_smem, acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    total = gl.sum(gl.sum(acc, axis=1), axis=0)
    gl.store(out + gl.program_id(0) * 2, total)


@gluon.jit
def _exponentials(a_smem, b_smem, out, iters, MODE: gl.constexpr):
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 128, 16])
    x = gl.full([64, 128], 0.25, gl.float32, ACC)
    if MODE != 1:
        for _ in range(iters * 2):
            x = gl.exp2(x) * -0.5
    total = gl.sum(gl.sum(x, axis=1), axis=0)
    gl.store(out + gl.program_id(0) * 2 + 1, total)


@gluon.jit
def _overlap_kernel(out, iters, MODE: gl.constexpr):
    a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, 64], gl.bfloat16)
    b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, 128], gl.bfloat16)
    a_smem = gl.allocate_shared_memory(gl.bfloat16, [64, 64], a_layout)
    b_smem = gl.allocate_shared_memory(gl.bfloat16, [64, 128], b_layout)
    fill: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    a_smem.store(gl.full([64, 64], 0.01, gl.bfloat16, fill))
    b_smem.store(gl.full([64, 128], 0.01, gl.bfloat16, fill))
    gl.warp_specialize(
        [(_products, (a_smem, b_smem, out, iters, MODE)), (_exponentials, (a_smem, b_smem, out, iters, MODE))],
        [4],
        [232],
    )


def main():
    offline = sys.argv[1:2] == ["offline"]
    if offline:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import aot_compile

        aot_compile.install()
    device = "cpu" if offline else "cuda"
    programs = 132 if offline else torch.cuda.get_device_properties(0).multi_processor_count
    out = torch.zeros(2 * programs, device=device)
    rows = {}
    for iters in (1000, 2000):
        for mode in (1, 2, 0):
            if offline:
                k = _overlap_kernel.warmup(out, iters, MODE=mode, num_warps=4, grid=(programs,))
                print(mode, aot_compile.ptxas_report(k))
                continue
            fn = lambda: _overlap_kernel[(programs,)](out, iters, MODE=mode, num_warps=4)  # noqa: E731
            fn()
            rows[f"iters={iters} mode={mode}"] = triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median")
            print(iters, mode, rows[f"iters={iters} mode={mode}"], flush=True)
        if offline:
            break
    if not offline:
        for iters in (1000, 2000):
            m, e, both = (rows[f"iters={iters} mode={mode}"] for mode in (1, 2, 0))
            print(f"iters {iters}: products {m:.3f} ms, exponentials {e:.3f} ms, both {both:.3f} ms; "
                  f"both / max {both / max(m, e):.3f}, both / sum {both / (m + e):.3f}")
        json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "mufu_overlap.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
