"""scratch (v181): which way faults, the package's forward or gf_peel's, one call each with a sync after it."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gf_peel

from flashattn2 import _gluon_forward as gf_pkg

name = sys.argv[1]
mod = {"pkg": gf_pkg, "peel": gf_peel}[name]
shape = tuple(int(x) for x in sys.argv[2].split(","))
causal = sys.argv[3] == "causal"
b, h, n, d = shape
q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
fwd = mod.HopperForward(q.shape, k.shape, q.dtype, q.device, causal, d**-0.5)
out, lse = torch.empty_like(q), torch.empty(b, h, n, device="cuda", dtype=torch.float32)
fwd(q, k, v, out, lse)
torch.cuda.synchronize()
ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
print(name, shape, causal, "three" if fwd.three_consumers else "two", "max error", (out.double() - ref).abs().max().item())
