"""Is fwd+bwd the sum of its parts? Times (do_bench medians, 3 alternating rounds) of: forward with grad,
autograd backward alone (retain_graph), forward+backward, for flashattn2 and cuDNN; and flashattn2's
backward launcher alone (triton_backward)."""
import json
import os
import statistics

import torch
import triton
import torch.nn.functional as F

from flashattn2 import flash_attention

torch.backends.cuda.enable_flash_sdp(False)  # SDPA: cuDNN only (every call below)
torch.backends.cuda.enable_mem_efficient_sdp(False)
torch.backends.cuda.enable_math_sdp(False)
SHAPES = [(4, 16, 4096, 128, False), (4, 16, 4096, 128, True), (1, 16, 16384, 64, True)]
rows = []
for b, h, n, d, causal in SHAPES:
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn_like(q)
    impl = {"ours": lambda: flash_attention(q, k, v, causal=causal),
            "cudnn": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)}
    fns = {}
    for name in impl:
        out = impl[name]()
        fns[name + "_fwd_grad"] = impl[name]
        fns[name + "_bwd"] = lambda out=out: torch.autograd.grad(out, (q, k, v), g, retain_graph=True)
        fns[name + "_fwd_bwd"] = lambda name=name: torch.autograd.grad(impl[name](), (q, k, v), g)
    samples = {key: [] for key in fns}
    for r in range(3):
        for key in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            samples[key].append(triton.testing.do_bench(fns[key], warmup=100, rep=400, return_mode="median"))
    row = {"shape": (b, h, n, d, causal), **{key: statistics.median(t) for key, t in samples.items()}}
    print({k_: (round(v_, 3) if isinstance(v_, float) else v_) for k_, v_ in row.items()}, flush=True)
    rows.append(row)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "additive.json"), "w"), indent=1)
