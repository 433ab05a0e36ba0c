"""scratch (v170): does ptxas serialize warpgroup products issued from a second worker partition, under each
Triton release? v125 found it does under 3.6 whatever the registers. A minimal forward-like consumer (S = Q K^T from
shared memory, an online-softmax step, O += P V with P from registers, 64 rows, head dim 64, 128 keys) placed in
partitions by LAYOUT, at head dims 64 and 128:

  d1     default consumer alone (no workers)
  d1w1   default consumer + one 4-warp worker consumer (the package's two-consumer arrangement, without a loader)
  d1w1i  d1w1 + an idle 4-warp worker at 24 registers (v125's gf2p_idle)
  i_w2   idle default + two worker consumers (v125's gf3p_idle_2w)
  d1w2   default consumer + two worker consumers (FlashAttention-3's three consumers)
  d1w2l  d1w2 + a 1-warp idle worker (a loader's place)

Compiled for sm_90a on the CPU (offline_compile's stand-in driver); prints ptxas -v's lines per layout and worker
register count.

    PYTHONPATH=packages/flashattn2/src:packages/flashattn2/benchmarks python packages/flashattn2/benchmarks/scratch/ws_probe.py
"""

from __future__ import annotations

import itertools
import os
import re
import sys

import torch
import triton
from offline_compile import Sm90Driver, ptxas_report, resource_usage
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma
from triton.runtime import driver

from flashattn2._gluon_common import warpgroup_wait

ROWS = 64
ONES = gl.constexpr(int(os.environ.get('ONES', '1')))
KEYS = 128


@gluon.jit
def _consume(q_smem, k_smem, v_smem, out_ptr, steps, ROW0: gl.constexpr):
    HEAD_DIM: gl.constexpr = q_smem.shape[1]
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 128, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    acc = gl.zeros([64, HEAD_DIM], gl.float32, o_layout)
    zero_s = gl.zeros([64, 128], gl.float32, s_layout)
    m_i = gl.full([64], -1.0e30, gl.float32, gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([64], gl.float32, gl.SliceLayout(1, s_layout))
    sums_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 8, 16])
    p_sums_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=sums_layout, k_width=2)
    sums = gl.zeros([64, 8], gl.float32, sums_layout)
    for _ in range(steps):
        s = warpgroup_mma(q_smem, k_smem.permute((1, 0)), zero_s, use_acc=False, is_async=True)
        s = warpgroup_wait(0, deps=[s])
        m_new = gl.maximum(m_i, gl.max(s, 1))
        p = gl.exp2(s - m_new[:, None])
        alpha = gl.exp2(m_i - m_new)
        l_i = l_i * alpha + gl.sum(p, 1)
        acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
        p_op = gl.convert_layout(p.to(gl.bfloat16), p_layout)
        if ONES:
            sums = sums * gl.convert_layout(alpha, gl.SliceLayout(1, sums_layout))[:, None]
            p_sums = gl.convert_layout(p.to(gl.bfloat16), p_sums_layout)
            sums = warpgroup_mma(p_sums, k_smem.slice(0, 8, dim=1), sums, is_async=True)
        acc = warpgroup_mma(p_op, v_smem, acc, is_async=True)
        if ONES:
            acc, sums = warpgroup_wait(0, deps=[acc, sums])
        else:
            acc = warpgroup_wait(0, deps=[acc])
        m_i = m_new
    acc = acc / gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))[:, None]
    if ONES:
        acc = acc + gl.convert_layout(gl.max(sums, 1), gl.SliceLayout(1, o_layout))[:, None]
    rows = gl.arange(0, 64, gl.SliceLayout(1, o_layout))
    cols = gl.arange(0, HEAD_DIM, gl.SliceLayout(0, o_layout))
    gl.store(out_ptr + (ROW0 + rows)[:, None] * HEAD_DIM + cols[None, :], acc)


@gluon.jit
def _idle(out_ptr):
    pass


@gluon.jit
def _kernel(
    q_ptr, k_ptr, v_ptr, out_ptr, steps, LAYOUT: gl.constexpr, WORKER_REGS: gl.constexpr, HEAD_DIM: gl.constexpr
):
    blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    q_rows = gl.arange(0, 64, gl.SliceLayout(1, blocked))
    k_rows = gl.arange(0, 128, gl.SliceLayout(1, blocked))
    cols = gl.arange(0, HEAD_DIM, gl.SliceLayout(0, blocked))
    q = gl.load(q_ptr + q_rows[:, None] * HEAD_DIM + cols[None, :])
    k = gl.load(k_ptr + k_rows[:, None] * HEAD_DIM + cols[None, :])
    v = gl.load(v_ptr + k_rows[:, None] * HEAD_DIM + cols[None, :])
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, HEAD_DIM], gl.bfloat16)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([128, HEAD_DIM], gl.bfloat16)
    q_smem = gl.allocate_shared_memory(gl.bfloat16, [64, HEAD_DIM], q_layout, q)
    k_smem = gl.allocate_shared_memory(gl.bfloat16, [128, HEAD_DIM], kv_layout, k)
    v_smem = gl.allocate_shared_memory(gl.bfloat16, [128, HEAD_DIM], kv_layout, v)
    if LAYOUT == "d1":
        _consume(q_smem, k_smem, v_smem, out_ptr, steps, 0)
    elif LAYOUT == "d1w1":
        gl.warp_specialize(
            [
                (_consume, (q_smem, k_smem, v_smem, out_ptr, steps, 0)),
                (_consume, (q_smem, k_smem, v_smem, out_ptr, steps, 64)),
            ],
            [4],
            [WORKER_REGS],
        )
    elif LAYOUT == "d1w1i":
        gl.warp_specialize(
            [
                (_consume, (q_smem, k_smem, v_smem, out_ptr, steps, 0)),
                (_consume, (q_smem, k_smem, v_smem, out_ptr, steps, 64)),
                (_idle, (out_ptr,)),
            ],
            [4, 4],
            [WORKER_REGS, 24],
        )
    elif LAYOUT == "i_w2":
        gl.warp_specialize(
            [
                (_idle, (out_ptr,)),
                (_consume, (q_smem, k_smem, v_smem, out_ptr, steps, 0)),
                (_consume, (q_smem, k_smem, v_smem, out_ptr, steps, 64)),
            ],
            [4, 4],
            [WORKER_REGS, WORKER_REGS],
        )
    elif LAYOUT == "d1w2":
        gl.warp_specialize(
            [
                (_consume, (q_smem, k_smem, v_smem, out_ptr, steps, 0)),
                (_consume, (q_smem, k_smem, v_smem, out_ptr, steps, 64)),
                (_consume, (q_smem, k_smem, v_smem, out_ptr, steps, 128)),
            ],
            [4, 4],
            [WORKER_REGS, WORKER_REGS],
        )
    elif LAYOUT == "d1w2L4":
        gl.warp_specialize(
            [
                (_consume, (q_smem, k_smem, v_smem, out_ptr, steps, 0)),
                (_consume, (q_smem, k_smem, v_smem, out_ptr, steps, 64)),
                (_consume, (q_smem, k_smem, v_smem, out_ptr, steps, 128)),
                (_idle, (out_ptr,)),
            ],
            [4, 4, 4],
            [WORKER_REGS, WORKER_REGS, 64],
        )
    else:  # d1w2l
        gl.warp_specialize(
            [
                (_consume, (q_smem, k_smem, v_smem, out_ptr, steps, 0)),
                (_consume, (q_smem, k_smem, v_smem, out_ptr, steps, 64)),
                (_consume, (q_smem, k_smem, v_smem, out_ptr, steps, 128)),
                (_idle, (out_ptr,)),
            ],
            [4, 4, 1],
            [WORKER_REGS, WORKER_REGS, 24],
        )


def main() -> None:
    driver.set_active(Sm90Driver())
    layouts = sys.argv[1:] or ["d1", "d1w1", "d1w1i", "i_w2", "d1w2", "d1w2l"]
    print("triton", triton.__version__)
    for layout, head_dim in itertools.product(layouts, (64,)):
        q = torch.empty(ROWS, head_dim, dtype=torch.bfloat16)
        kv = torch.empty(KEYS, head_dim, dtype=torch.bfloat16)
        out = torch.empty(3 * ROWS, head_dim, dtype=torch.float32)
        for regs in (136, 144, 152) if layout != "d1" else (0,):
            try:
                k = _kernel.warmup(
                    q, kv, kv, out, 8, LAYOUT=layout, WORKER_REGS=regs, HEAD_DIM=head_dim, num_warps=4, grid=(1,)
                )
            except Exception as failure:  # report and go on to the next layout
                print(layout, head_dim, regs, "ERROR", str(failure).strip().splitlines()[-1][:300], flush=True)
                continue
            maxnreg = re.findall(r"\.maxnreg \d+", k.asm["ptx"])
            setmaxnreg = re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+\d+", k.asm["ptx"])
            wgmma = k.asm["ptx"].count("wgmma.mma_async")
            print(layout, head_dim, regs, resource_usage(k), ptxas_report(k), maxnreg, len(setmaxnreg), wgmma, flush=True)


if __name__ == "__main__":
    main()
