"""scratch (session 39): do one warpgroup's exponentials run beside another warpgroup's products when the products
take their A operand from registers (RS, as the forward's P V does) rather than from shared memory (SS, v146)? One
program per multiprocessor; a 4-warp partition issues chains of four 64 x 64 x 128 bf16 products (P V's shape) and
waits for each chain; another computes exp2 over a 64 x 128 fp32 tile per iteration. MODE: 1 SS products alone,
2 exponentials alone, 0 SS products and exponentials, 3 RS products alone, 4 RS products and exponentials.
python rs_overlap.py [offline]"""
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
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16])
    acc = gl.zeros([64, 64], gl.float32, ACC)
    if MODE == 0 or MODE == 1:
        for _ in range(iters):
            acc = warpgroup_mma(a_smem, b_smem, acc, is_async=True)
            acc = warpgroup_mma(a_smem, b_smem, acc, is_async=True)
            acc = warpgroup_mma(a_smem, b_smem, acc, is_async=True)
            acc = warpgroup_mma(a_smem, b_smem, acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    if MODE == 3 or MODE == 4:
        a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=ACC, k_width=2)
        a = a_smem.load(a_layout)
        for _ in range(iters):
            acc = warpgroup_mma(a, b_smem, acc, is_async=True)
            acc = warpgroup_mma(a, b_smem, acc, is_async=True)
            acc = warpgroup_mma(a, b_smem, acc, is_async=True)
            acc = warpgroup_mma(a, b_smem, acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    total = gl.sum(gl.sum(acc, axis=1), axis=0)
    gl.store(out + gl.program_id(0) * 2, total)


@gluon.jit
def _exponentials(a_smem, b_smem, out, iters, MODE: gl.constexpr):
    layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 128, 16])
    x = gl.full([64, 128], 0.25, gl.float32, layout)
    if MODE == 0 or MODE == 2 or MODE == 4:
        for _ in range(iters * 2):
            x = gl.exp2(x) * -0.5
    total = gl.sum(gl.sum(x, axis=1), axis=0)
    gl.store(out + gl.program_id(0) * 2 + 1, total)


@gluon.jit
def _overlap_kernel(out, iters, MODE: gl.constexpr):
    a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, 128], gl.bfloat16)
    b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([128, 64], gl.bfloat16)
    a_smem = gl.allocate_shared_memory(gl.bfloat16, [64, 128], a_layout)
    b_smem = gl.allocate_shared_memory(gl.bfloat16, [128, 64], b_layout)
    fill: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    a_smem.store(gl.full([64, 128], 0.01, gl.bfloat16, fill))
    b_smem.store(gl.full([128, 64], 0.01, gl.bfloat16, fill))
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
    for rep in range(2):
        for mode in (1, 3, 2, 0, 4):
            iters = 2000
            if offline:
                k = _overlap_kernel.warmup(out, iters, MODE=mode, num_warps=4, grid=(programs,))
                print(mode, aot_compile.ptxas_report(k))
                continue
            fn = lambda: _overlap_kernel[(programs,)](out, iters, MODE=mode, num_warps=4)  # noqa: E731
            fn()
            ms = triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median")
            rows.setdefault(f"mode={mode}", []).append(ms)
            print(rep, mode, ms, flush=True)
        if offline:
            break
    if not offline:
        med = {k: sorted(v)[len(v) // 2] for k, v in rows.items()}
        ss, rs, e, ss_e, rs_e = (min(rows[f"mode={m}"]) for m in (1, 3, 2, 0, 4))
        summary = {"ss_alone": ss, "rs_alone": rs, "exp_alone": e, "ss_and_exp": ss_e, "rs_and_exp": rs_e,
                   "ss_both_over_max": ss_e / max(ss, e), "ss_both_over_sum": ss_e / (ss + e),
                   "rs_both_over_max": rs_e / max(rs, e), "rs_both_over_sum": rs_e / (rs + e)}
        print(json.dumps(summary, indent=1))
        json.dump({"rows": rows, "summary": summary}, open(os.path.join(os.environ.get("OUT", "."), "rs_overlap.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
