import sys

sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
import aot_compile

aot_compile.install()
import gb_chains as g
import torch

for chains in (1, 4):
    acc = torch.zeros(4 * chains, 2, 1024, 64); dq = torch.zeros(4, 2, 1024, 64, dtype=torch.bfloat16)
    cnt = torch.zeros(4096, dtype=torch.int32)
    k = g._causal_epilogue_kernel.warmup(acc, dq, cnt, 2, 1024, 8, -(-8 // chains), HEAD_DIM=64, BLOCK_M=128, CHAINS=chains, grid=(1, 8, 1), num_warps=4, num_stages=1, launch_pdl=True)
    print("epilogue", chains, aot_compile.ptxas_report(k))
    o = torch.zeros(4, 2, 1024, 64, dtype=torch.bfloat16); delta = torch.zeros(8192)
    k = g._prologue_kernel.warmup(o, o, delta, cnt, *o.stride()[:3], *o.stride()[:3], 2, 1024, 8, HEAD_DIM=64, BLOCK_M=128, CHAINS=chains, grid=(8, 8, 1), num_warps=4, num_stages=1)
    print("prologue", chains, aot_compile.ptxas_report(k))
