"""The Hopper backward's prologue (Delta = rowsum(O * dO) and the counters zeroed) against variants with more rows
per program: time (do_bench medians, alternating rounds) and bandwidth, beside a device-to-device copy."""
import json
import os
import statistics

import torch
import triton
import triton.language as tl

from flashattn2._gluon_backward import HopperBackward


@triton.jit
def _prologue_rows(out, grad_out, delta, counters, stride_ob, stride_oh, stride_on, stride_gb, stride_gh, stride_gn,
                   heads, n_ctx, q_tiles, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, ROWS: tl.constexpr):
    tile, bh = tl.program_id(0), tl.program_id(1)
    b, h = bh // heads, bh % heads
    rows = tile * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, HEAD_DIM)
    ok = rows < n_ctx
    o = tl.load(out + b * stride_ob + h * stride_oh + rows[:, None] * stride_on + cols[None, :], mask=ok[:, None])
    do = tl.load(grad_out + b * stride_gb + h * stride_gh + rows[:, None] * stride_gn + cols[None, :], mask=ok[:, None])
    tl.store(delta + bh * n_ctx + rows, tl.sum(o.to(tl.float32) * do.to(tl.float32), 1), mask=ok)
    TILES: tl.constexpr = ROWS // BLOCK_M
    tiles = tile * TILES + tl.arange(0, TILES)
    tl.store(counters + bh * q_tiles + tiles, tl.zeros([TILES], tl.int32), mask=tiles < q_tiles)
    if tile + bh == 0:
        tl.store(counters + q_tiles * tl.num_programs(1), 0)


rows_out = []
for b, h, n, d, causal in [(4, 16, 4096, 128, False), (4, 16, 4096, 128, True), (1, 16, 16384, 64, True),
                           (2, 32, 4096, 128, True), (8, 16, 2048, 64, True)]:
    o = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
    g = torch.randn_like(o)
    hb = HopperBackward(o.shape, o.shape, o.stride(), g.stride(), o.dtype, o.device, causal, d**-0.5)
    bm = hb.block_m
    q_tiles = triton.cdiv(n, bm)
    ref_delta = torch.empty(b * h * n, device="cuda")
    ref_cnt = torch.full((b * h * q_tiles + 1,), 7, dtype=torch.int32, device="cuda")
    fns = {"package": lambda: hb.prologue(o, g, ref_delta, ref_cnt)}
    fns["package"]()
    checks = {}
    for rows, warps in [(bm, 4), (bm, 8), (2 * bm, 4), (2 * bm, 8), (4 * bm, 8)]:
        if rows * d > 64 * 1024:
            continue
        dl = torch.empty_like(ref_delta)
        cnt = torch.full_like(ref_cnt, 7)
        grid = (triton.cdiv(n, rows), b * h)

        def fn(dl=dl, cnt=cnt, grid=grid, rows=rows, warps=warps):
            _prologue_rows[grid](o, g, dl, cnt, *o.stride()[:3], *g.stride()[:3], h, n, q_tiles, HEAD_DIM=d,
                                 BLOCK_M=bm, ROWS=rows, num_warps=warps, num_stages=1)

        fn()
        torch.cuda.synchronize()
        name = f"rows{rows}_w{warps}"
        checks[name] = bool(torch.equal(dl, ref_delta)) and bool(torch.equal(cnt, torch.zeros_like(cnt)))
        fns[name] = fn
    src = torch.randn(2 * b * h * n * d, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    fns["copy_same_bytes"] = lambda: dst.copy_(src)
    samples = {k: [] for k in fns}
    names = list(fns)
    for r in range(7):
        for k in names if r % 2 == 0 else names[::-1]:
            samples[k].append(triton.testing.do_bench(fns[k], warmup=25, rep=100, return_mode="median"))
    nbytes = 2 * o.numel() * 2
    row = {"shape": (b, h, n, d), "causal": causal, "equal_to_package": checks,
           "us": {k: round(1000 * statistics.median(v), 2) for k, v in samples.items()},
           "read_TBps": {k: round(nbytes / statistics.median(v) / 1e9, 2) for k, v in samples.items()}}
    print(row, flush=True)
    rows_out.append(row)
json.dump(rows_out, open(os.path.join(os.environ.get("OUT", "."), "prologue.json"), "w"), indent=1)
