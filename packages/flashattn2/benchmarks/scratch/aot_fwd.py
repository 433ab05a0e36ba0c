"""Compile scratch/gfwd.py for sm_90a without a GPU: python aot_fwd.py CAUSAL HEAD_DIM CONSUMERS BLOCK_N MAXNREG."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import aot_compile; aot_compile.install()
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

import gfwd

causal, d, consumers, bn, maxnreg = (int(x) for x in sys.argv[1:6])
q = torch.randn(1, 2, 384, d, dtype=torch.bfloat16)
lse = torch.empty(1, 2, 384)
lay_m = gl.NVMMASharedLayout.get_default_for([1, 1, 64, d], gl.bfloat16)
lay_n = gl.NVMMASharedLayout.get_default_for([1, 1, bn, d], gl.bfloat16)
extra = {"maxnreg": maxnreg} if maxnreg else {}
k = gfwd._hopper_forward_kernel.warmup(
    TensorDescriptor.from_tensor(q, [1, 1, 64, d], lay_m), TensorDescriptor.from_tensor(q, [1, 1, bn, d], lay_n),
    TensorDescriptor.from_tensor(q, [1, 1, bn, d], lay_n), TensorDescriptor.from_tensor(q, [1, 1, 64, d], lay_m),
    lse, 2, 1, 384, 0.1, CAUSAL=bool(causal), NEGATIVE_SCALE=False, HEAD_DIM=d, CONSUMERS=consumers, BLOCK_N=bn,
    num_warps=4, grid=(3, 2), **extra)
open("/tmp/s10b/fwd.ptx", "w").write(k.asm["ptx"])
BIN = os.path.join(os.path.dirname(aot_compile.__file__), "")
import subprocess, triton
ptxas = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/ptxas")
r = subprocess.run([ptxas, "-v", "--gpu-name", "sm_90a", "/tmp/s10b/fwd.ptx", "-o", "/tmp/s10b/fwd.o"], capture_output=True, text=True)
print(sys.argv[1:6], "smem", k.metadata.shared, "SERIALIZED" if "C7512" in r.stderr else "ok",
      [l.strip() for l in r.stderr.splitlines() if "spill" in l or "Used" in l], flush=True)
