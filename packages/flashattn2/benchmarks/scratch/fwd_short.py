"""Scratch: GPU time of the forward at short causal D = 64 shapes (CUDA-graph replays, do_bench_cudagraph): the
Triton kernel at each candidate tile, the Hopper kernel (no pair limit), cuDNN; and eager do_bench of the package."""
import json
import os

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashattn2._gluon_forward as gf
from flashattn2 import flash_attention
from flashattn2._configs import candidate_tiles
from flashattn2._triton_forward import forward_plan
from flashattn2._launch import alignments

rows = []
for b, h, n, d in [(8, 16, 1024, 64), (4, 16, 1024, 64), (16, 16, 1024, 64), (8, 16, 2048, 64), (2, 16, 2048, 64), (8, 16, 1024, 128)]:
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    scale = d**-0.5
    plan = forward_plan(q.shape, q.stride(), k.shape, k.stride(), v.stride(), q.dtype, q.device, True, scale, alignments(q, k, v))
    o, lse = torch.empty_like(q), torch.empty(b, h, n, device="cuda")
    ref = flash_attention(q, k, v, causal=True)
    fns = {}
    for tile in candidate_tiles("forward", d, q.dtype, q.device):
        launch = plan.compiled_launch(tile)
        fns[f"triton {tuple(tile)}"] = lambda launch=launch: launch(q, k, v, o, lse)
    hf = gf.HopperForward(q.shape, k.shape, q.dtype, q.device, True, scale)
    fns["hopper"] = lambda: hf(q, k, v, o, lse)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    fns["cudnn"] = cudnn
    row = {"shape": (b, h, n, d), "graph_ms": {}, "eager_ms": {}, "err": {}}
    for name, fn in fns.items():
        try:
            fn()
            if name != "cudnn":
                row["err"][name] = (o.float() - ref.float()).abs().max().item()
            row["graph_ms"][name] = triton.testing.do_bench_cudagraph(fn, rep=100, return_mode="median")
        except Exception as e:  # noqa: BLE001
            row["graph_ms"][name] = repr(e)[:120]
    row["eager_ms"]["package"] = triton.testing.do_bench(lambda: flash_attention(q, k, v, causal=True), return_mode="median")
    row["eager_ms"]["cudnn"] = triton.testing.do_bench(cudnn, return_mode="median")
    print(row["shape"], {k_: (round(v_, 4) if isinstance(v_, float) else v_) for k_, v_ in row["graph_ms"].items()}, row["eager_ms"], flush=True)
    rows.append(row)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "fwd_short.json"), "w"), indent=1)
