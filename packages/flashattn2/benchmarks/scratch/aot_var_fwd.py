"""Compile a variant of the package's Hopper forward (a module in this folder) for sm_90a: python aot_var_fwd.py MODULE CAUSAL HEAD_DIM."""
import importlib
import os
import subprocess
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(__file__))
import aot_compile; aot_compile.install()
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

gf = importlib.import_module(sys.argv[1])
causal, d = (int(x) for x in sys.argv[2:4])
bn = gf.BLOCK_N.value
q = torch.randn(1, 2, 384, d, dtype=torch.bfloat16)
lse = torch.empty(1, 2, 384)
hf = gf.HopperForward(q.shape, q.shape, torch.bfloat16, torch.device("cpu"), bool(causal), 0.1)
k = gf._hopper_forward_kernel.warmup(
    TensorDescriptor.from_tensor(q, [1, 1, 64, d], hf.q_layout), TensorDescriptor.from_tensor(q, [1, 1, bn, d], hf.kv_layout),
    TensorDescriptor.from_tensor(q, [1, 1, bn, d], hf.kv_layout), TensorDescriptor.from_tensor(q, [1, 1, 64, d], hf.q_layout),
    lse, *hf.scalars, CAUSAL=bool(causal), NEGATIVE_SCALE=False, HEAD_DIM=d, num_warps=gf.NUM_WARPS, grid=hf.grid)
open("/tmp/s10b/pv.ptx", "w").write(k.asm["ptx"])
ptxas = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/ptxas")
r = subprocess.run([ptxas, "-v", "--gpu-name", "sm_90a", "/tmp/s10b/pv.ptx", "-o", "/tmp/s10b/pv.o"], capture_output=True, text=True)
print(sys.argv[1:4], "smem", k.metadata.shared, "SERIALIZED" if "C7512" in r.stderr else "ok",
      [l.strip() for l in r.stderr.splitlines() if "spill" in l or "C75" in l], flush=True)
