"""Where the first fp32 backward's seconds go (fresh process, empty TRITON_CACHE_DIR): cProfile by function,
the compile stages and ptxas subprocesses."""
import cProfile
import pstats
import sys
import time

import torch

import flashattn2

causal = sys.argv[1] == "causal"
q, k, v = (torch.randn(4, 128, 64, device="cuda", requires_grad=True) for _ in range(3))
t = time.perf_counter()
out = flashattn2.flash_attention(q, k, v, causal=causal)
torch.cuda.synchronize()
print("forward", round(time.perf_counter() - t, 2), flush=True)
g = torch.randn_like(out)
prof = cProfile.Profile()
t = time.perf_counter()
prof.enable()
out.backward(g)
torch.cuda.synchronize()
prof.disable()
print("backward", round(time.perf_counter() - t, 2), flush=True)
st = pstats.Stats(prof)
st.sort_stats("cumulative").print_stats(r"compile|make_|subprocess|run|optimize|translate|ptxas|link|load_binary", 25)
