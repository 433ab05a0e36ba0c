"""Compile a Hopper forward module (the package's copy gf_head or a scratch variant) for sm_90a without a GPU:
python aot_fwd.py MODULE CAUSAL HEAD_DIM [ptx_out] (triton 3.6 venv, PYTHONPATH with the package's src)."""
import importlib
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import aot_compile

aot_compile.install()
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

name, causal, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
gf = importlib.import_module(name)
if hasattr(gf._hopper, "usable_multiprocessors"):
    gf._hopper.usable_multiprocessors = lambda device: 132
n = 384
q = torch.randn(1, 2, n, d, dtype=torch.bfloat16)
lse = torch.empty(1, 2, n)
hf = gf.HopperForward(q.shape, q.shape, torch.bfloat16, torch.device("cpu"), bool(causal), 0.1)
bn = hf.block_n
extra = (torch.zeros(8, dtype=torch.int32),) if ("order_ptr" in gf._hopper_forward_kernel.arg_names or "schedule_table" in gf._hopper_forward_kernel.arg_names) else () # gf._hopper_forward_kernel.arg_names else ()
k = gf._hopper_forward_kernel.warmup(
    TensorDescriptor.from_tensor(q, [1, 1, 64, d], hf.q_layout), TensorDescriptor.from_tensor(q, [1, 1, bn, d], hf.kv_layout),
    TensorDescriptor.from_tensor(q, [1, 1, bn, d], hf.kv_layout), TensorDescriptor.from_tensor(q, [1, 1, 64, d], hf.q_layout),
    lse, *extra, *hf.kernel.scalars, **hf.kernel.constexprs, num_warps=4, grid=hf.grid)
print(name, "causal" if causal else "full", d, "smem", k.metadata.shared, aot_compile.ptxas_report(k), flush=True)
if len(sys.argv) > 4:
    open(sys.argv[4] + ".ptx", "w").write(k.asm["ptx"])
