"""Scratch: backward kernels with a register cap (more programs per SM), timed against no cap, same process."""
import json, os, sys
import torch, triton
import flashattn2._launch as L
from flashattn2._configs import Tile
from flashattn2._triton_forward import forward_plan, triton_forward, forward_tiles
from flashattn2._triton_backward import backward_plan, triton_backward, dq_tiles, dkdv_tiles
bench = lambda f: triton.testing.do_bench(f, warmup=25, rep=150, return_mode="median")
CASES = [  # (shape, kernel, tile, caps)
    ((1, 16, 16384, 64, True), "_dkdv_kernel", None, [None, 168, 128]),
    ((1, 16, 16384, 64, True), "_dkdv_kernel", Tile(64, 64, 4, 3), [None, 168]),
    ((1, 16, 16384, 64, True), "_dq_kernel", Tile(64, 64, 4, 2), [None, 168, 128]),
    ((1, 16, 16384, 64, True), "_forward_kernel", Tile(64, 64, 4, 3), [None, 168, 128]),
    ((4, 16, 4096, 128, False), "_dkdv_kernel", None, [None, 168]),
    ((4, 16, 4096, 128, False), "_forward_kernel", Tile(64, 64, 4, 3), [None, 168]),
    ((4, 16, 4096, 128, True), "_forward_kernel", Tile(64, 64, 4, 3), [None]),
    ((4, 16, 4096, 128, True), "_forward_kernel", None, [None]),
]
choosers = {"_dkdv_kernel": dkdv_tiles, "_dq_kernel": dq_tiles, "_forward_kernel": forward_tiles}
rows = []
for (b, h, n, d, causal), kern, tile, caps in CASES:
    torch.manual_seed(0)
    q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    s = d ** -0.5
    for cap in caps:
        L.MAXNREG.clear()
        if cap: L.MAXNREG[kern] = cap
        choosers[kern].pinned = tile
        forward_plan.cache_clear(); backward_plan.cache_clear()
        try:
            o, lse = triton_forward(q, k, v, causal, s)
            ref = triton_backward(g, q, k, v, o, lse, causal, s)
            ms = bench(lambda: triton_forward(q, k, v, causal, s)) if kern == "_forward_kernel" else bench(lambda: triton_backward(g, q, k, v, o, lse, causal, s))
            row = dict(shape=[b, h, n, d, causal], kernel=kern, tile=tile and list(tile), cap=cap, ms=ms)
        except Exception as e:
            row = dict(shape=[b, h, n, d, causal], kernel=kern, tile=tile and list(tile), cap=cap, error=str(e)[:200])
        print(row, flush=True); rows.append(row)
        choosers[kern].pinned = None
json.dump(rows, open(os.path.join(os.environ["OUT"], "maxnreg.json"), "w"), indent=1)
