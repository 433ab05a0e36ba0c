"""Compile a Gluon backward draft for sm_90a without a GPU: python aot_try.py HEAD_DIM CAUSAL(0|1) DETERMINISTIC(0|1)
with GBWD=<module>; prints shared memory bytes and ptxas registers/spills (needs triton==3.6.0 and torch on the CPU)."""
import os, sys, torch
sys.path.insert(0, os.path.dirname(__file__))
import aot_compile; aot_compile.install()
import importlib, os; gbwd = importlib.import_module(os.environ.get("GBWD", "gbwd_v2"))
d = int(sys.argv[1]); causal = sys.argv[2] == "1"; det = sys.argv[3] == "1"
b,h,n = 1,2,384
q = torch.randn(b,h,n,d,dtype=torch.bfloat16)
lse = torch.randn(b,h,n)
k = gbwd.gluon_backward(q, q, q, q, q, lse, causal, 0.1, deterministic=det, warmup_only=True)
print(d, causal, det, k.metadata.shared, aot_compile.ptxas_report(k))
open(f"/tmp/gbwd_{d}_{int(causal)}_{int(det)}.ptx","w").write(k.asm["ptx"])
open(f"/tmp/gbwd_{d}_{int(causal)}_{int(det)}.ttgir","w").write(k.asm["ttgir"])
