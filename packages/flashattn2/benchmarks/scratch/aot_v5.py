"""Compile gbwd_v4 for sm_90a without a GPU: python aot_v4.py D CAUSAL DET ORDER KSLICE DQ_BUFS STAGES."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import aot_compile; aot_compile.install()
import gbwd_v5 as gbwd

d, causal, det, order, kslice, dqb, stages = (int(x) for x in sys.argv[1:8])
bm = int(os.environ.get("BM", "64")); dsb = int(os.environ.get("DSB", "0")) or None
b, h, n = 1, 2, 384
q = torch.randn(b, h, n, d, dtype=torch.bfloat16)
lse = torch.randn(b, h, n)
k = gbwd.gluon_backward(q, q, q, q, q, lse, bool(causal), 0.1, deterministic=bool(det), warmup_only=True, delta=lse, order=order,
                        kslice=kslice, dq_bufs=dqb, stages=stages, block_m=bm, ds_bufs=dsb, hv=int(os.environ.get("HV", "0")), chains=int(os.environ.get("CH", "1")))
print(sys.argv[1:8], k.metadata.shared, aot_compile.ptxas_report(k), flush=True)
open(f"/tmp/v5_{'_'.join(sys.argv[1:8])}.ptx", "w").write(k.asm["ptx"])
open(f"/tmp/v5_{'_'.join(sys.argv[1:8])}.ttgir", "w").write(k.asm["ttgir"])
