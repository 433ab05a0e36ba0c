"""Scratch: GPU time (CUDA-graph replays) of the Triton forward at short D = 64 shapes, causal and full, at four
tiles, with cuDNN."""
import json
import os

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashattn2._configs import Tile
from flashattn2._launch import alignments
from flashattn2._triton_forward import forward_plan

TILES = [Tile(128, 64, 8, 4), Tile(128, 64, 8, 3), Tile(64, 64, 4, 3), Tile(64, 64, 4, 2)]
rows = []
for b, h, n, d, causal, dtype in [(8, 16, 1024, 64, True, torch.bfloat16), (8, 16, 1024, 64, False, torch.bfloat16),
                                  (8, 16, 1024, 64, True, torch.float16), (1, 16, 1024, 64, True, torch.bfloat16),
                                  (32, 16, 512, 64, True, torch.bfloat16), (32, 16, 512, 64, False, torch.bfloat16),
                                  (64, 16, 256, 64, True, torch.bfloat16), (4, 16, 2048, 64, True, torch.bfloat16),
                                  (4, 16, 2048, 64, False, torch.bfloat16), (16, 16, 2048, 64, True, torch.bfloat16),
                                  (4, 16, 1024, 32, True, torch.bfloat16), (2, 16, 4096, 64, False, torch.bfloat16)]:
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=dtype) for _ in range(3))
    plan = forward_plan(q.shape, q.stride(), k.shape, k.stride(), v.stride(), q.dtype, q.device, causal, d**-0.5, alignments(q, k, v))
    o, lse = torch.empty_like(q), torch.empty(b, h, n, device="cuda")
    fns = {}
    for tile in TILES:
        launch = plan.compiled_launch(tile)
        fns[tuple(tile)] = lambda launch=launch: launch(q, k, v, o, lse)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    fns["cudnn"] = cudnn
    times = {name: [] for name in fns}
    for fn in fns.values():
        fn()
    for r in range(3):
        for name in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            times[name].append(triton.testing.do_bench_cudagraph(fns[name], rep=50, return_mode="median"))
    med = {str(name): sorted(t)[1] for name, t in times.items()}
    rows.append({"shape": (b, h, n, d), "causal": causal, "dtype": str(dtype), "graph_ms": med})
    print(rows[-1]["shape"], causal, dtype, {k_: round(v_, 4) for k_, v_ in med.items()}, flush=True)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "fwd_tiles_short.json"), "w"), indent=1)
