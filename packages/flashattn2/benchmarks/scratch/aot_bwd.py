"""Compile a Hopper backward module (the package's or a scratch copy) for sm_90a without a GPU:
python aot_bwd.py MODULE CAUSAL HEAD_DIM (triton 3.6 venv, PYTHONPATH with the package's src)."""
import importlib
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import aot_compile

aot_compile.install()
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

name, causal, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
gb = importlib.import_module(name)
b, h, n = 1, int(os.environ.get("AOT_H", "2")), int(os.environ.get("AOT_N", "384"))
q = torch.randn(b, h, n, d, dtype=torch.bfloat16)
lse = torch.randn(b * h * n)
m, bn = (gb.ring_rows(d) if hasattr(gb, "ring_rows") else gb.block_m(d)), gb.BLOCK_N.value
sm = gb.SUB_M.value
dqc = gb.dq_cols(d) if hasattr(gb, "dq_cols") else gb.DQ_COLS.value
from triton.experimental.gluon import language as gl

lay = {
    "m": gl.NVMMASharedLayout.get_default_for([1, 1, m, d], gl.bfloat16),
    "n": gl.NVMMASharedLayout.get_default_for([1, 1, bn // (2 if hasattr(gb, "KV_HALVES") else 1), d], gl.bfloat16),
    "dq": gl.NVMMASharedLayout(swizzle_byte_width=32, element_bitwidth=32, rank=4) if hasattr(gb, "DQ_BOX") else gl.NVMMASharedLayout.get_default_for([1, 1, sm, dqc], gl.float32),
    "row": gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1),
}
acc = torch.zeros(b, h, n, d)
cnt = torch.zeros(h * n // 64 + 8, dtype=torch.int32)
q_tiles, key_tiles = -(-n // gb.block_m(d)), -(-n // bn)
k = gb._hopper_backward_kernel.warmup(
    TensorDescriptor.from_tensor(q, [1, 1, m, d], lay["m"]),
    TensorDescriptor.from_tensor(q, [1, 1, bn // (2 if hasattr(gb, "KV_HALVES") else 1), d], lay["n"]),
    TensorDescriptor.from_tensor(q, [1, 1, bn // (2 if hasattr(gb, "KV_HALVES") else 1), d], lay["n"]),
    TensorDescriptor.from_tensor(q, [1, 1, m, d], lay["m"]),
    TensorDescriptor.from_tensor(acc, [1, 1, sm, dqc], lay["dq"]),
    TensorDescriptor.from_tensor(lse, [m], lay["row"]),
    TensorDescriptor.from_tensor(lse, [m], lay["row"]),
    q, q, *((TensorDescriptor.from_tensor(q, [1, 1, 64, 64], gl.NVMMASharedLayout.get_default_for([1, 1, 64, 64], gl.bfloat16)),) * 2 if "dk_desc" in gb._hopper_backward_kernel.arg_names else ()), *((acc, q) if 'dq_acc_ptr' in gb._hopper_backward_kernel.arg_names else ()), cnt, cnt[-1:], *((torch.zeros(64, dtype=torch.int32),) if 'table' in gb._hopper_backward_kernel.arg_names else ()), *((torch.zeros(4096, dtype=torch.int64),) if "stamps" in gb._hopper_backward_kernel.arg_names else ()), *((key_tiles * b * h,) if "items" in gb._hopper_backward_kernel.arg_names else ()), h, 1, n, q_tiles, key_tiles, 0.125 * 1.4426950408889634, 0.125, *q.stride()[:3], *((4,) if 'causal_group' in gb._hopper_backward_kernel.arg_names else ()),
    CAUSAL=bool(causal), HEAD_DIM=d, PER_QUERY_HEAD=os.environ.get("AOT_PQH") == "1", **({'RAGGED': os.environ.get('AOT_RAGGED') == '1'} if 'RAGGED' in gb._hopper_backward_kernel.arg_names else {}), **({'PERSISTENT': os.environ.get('AOT_PERSISTENT') == '1'} if 'PERSISTENT' in gb._hopper_backward_kernel.arg_names else {}), num_warps=gb.NUM_WARPS, grid=(key_tiles * b * h,))
print(name, "causal" if causal else "full", d, k.metadata.shared, aot_compile.ptxas_report(k), flush=True)
if len(sys.argv) > 4:
    open(sys.argv[4] + ".ptx", "w").write(k.asm["ptx"])
