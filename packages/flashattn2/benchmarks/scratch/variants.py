"""Scratch: time kernel variants (flashattn2._triton_common.EXPERIMENT bits) side by side with cuDNN."""
import json, sys, time, os
import torch, triton
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
import flashattn2._triton_common as C
from flashattn2._triton_forward import forward_plan, triton_forward
from flashattn2._triton_backward import backward_plan, triton_backward
from flashattn2 import flash_attention
from flashattn2.testing import assert_attention_matches_reference

SHAPES = [(1, 16, 16384, 64, True), (4, 16, 4096, 128, True), (4, 16, 4096, 128, False), (8, 16, 1024, 64, True)]
variants = [int(x) for x in sys.argv[1].split(",")]
out = {"rows": [], "device": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__}
bench = lambda f: triton.testing.do_bench(f, warmup=25, rep=150, return_mode="median")
for (b, h, n, d, causal) in SHAPES:
    torch.manual_seed(0)
    q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    qs, ks, vs = (x.clone().requires_grad_(True) for x in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        f = lambda: F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)
        cf = bench(f)
        o = f()
        cb = bench(lambda: torch.autograd.grad(o, (qs, ks, vs), g, retain_graph=True))
    row = {"shape": [b, h, n, d, causal], "cudnn_fwd": cf, "cudnn_bwd": cb}
    scale = d ** -0.5
    for flags in variants:
        C.EXPERIMENT = flags
        forward_plan.cache_clear(); backward_plan.cache_clear()
        try:
            t0 = time.perf_counter(); o, lse = triton_forward(q, k, v, causal, scale); torch.cuda.synchronize()
            grads = triton_backward(g, q, k, v, o, lse, causal, scale); torch.cuda.synchronize()
            comp = time.perf_counter() - t0
            fw = bench(lambda: triton_forward(q, k, v, causal, scale))
            bw = bench(lambda: triton_backward(g, q, k, v, o, lse, causal, scale))
            row[f"v{flags}"] = {"fwd": fw, "bwd": bw, "compile_s": comp, "total": fw + bw}
        except Exception as e:
            row[f"v{flags}"] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
        print(row["shape"], flags, row[f"v{flags}"], "cudnn", cf, cb, cf + cb, flush=True)
    out["rows"].append(row)
# accuracy per variant
acc = {}
for flags in (variants if os.environ.get('ACC') else []):
    C.EXPERIMENT = flags
    forward_plan.cache_clear(); backward_plan.cache_clear()
    res = []
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        for (b, h, n, d, causal) in [(2, 4, 1000, 64, True), (2, 4, 777, 128, False), (1, 2, 300, 256, True)]:
            torch.manual_seed(1)
            q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=dtype) for _ in range(3))
            try:
                assert_attention_matches_reference(lambda q, k, v, c: flash_attention(q, k, v, causal=c), q, k, v, causal=causal)
                res.append("ok")
            except Exception as e:
                res.append(f"{dtype} {n} {d}: {str(e)[:200]}")
    # determinism
    q, k, v, g = (torch.randn(1, 8, 2048, 64, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    o1, l1 = triton_forward(q, k, v, True, 0.125); r1 = triton_backward(g, q, k, v, o1, l1, True, 0.125)
    o2, l2 = triton_forward(q, k, v, True, 0.125); r2 = triton_backward(g, q, k, v, o2, l2, True, 0.125)
    res.append("deterministic" if all(torch.equal(a, b) for a, b in zip((o1, *r1), (o2, *r2))) else "NOT deterministic")
    acc[flags] = res
    print("accuracy", flags, res, flush=True)
out["accuracy"] = acc
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "variants.json"), "w"), indent=1)
