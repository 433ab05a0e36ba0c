"""Session 27: host time of the package before (scratch/old_src, HEAD b43644f) and after the direct launches and
allocations, in alternating child processes. Each child: eager forward+backward per call at (1, 4, 128, 64)
causal against SDPA (matrix.py's host_times: 21 rounds of 50 calls, the ratio the median of the rounds'), and
(8, 16, 1024, 64) causal forward+backward against cuDNN (do_bench median, 3 alternating rounds)."""

import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = {"before": os.path.join(HERE, "old_src/packages/flashattn2/src"), "after": os.path.join(HERE, "../../src")}


def child():
    import torch
    import torch.nn.functional as F
    import triton
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sys.path.insert(0, os.path.join(HERE, ".."))
    import matrix

    import flashattn2

    host = matrix.host_times(reps=50, rounds=21)
    q, k, v = (torch.randn(8, 16, 1024, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn_like(q)

    def ours():
        torch.autograd.grad(flashattn2.flash_attention(q, k, v, causal=True), (q, k, v), g)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), g)

    times = {"ours": [], "cudnn": []}
    for r in range(3):
        for name in (["ours", "cudnn"] if r % 2 == 0 else ["cudnn", "ours"]):
            fn = ours if name == "ours" else cudnn
            times[name].append(triton.testing.do_bench(fn, warmup=50, rep=200, return_mode="median"))
    print(json.dumps({"source": flashattn2.__file__, "host_ratio": host["ratio"], "host_ms": host["flashattn2"],
                      "sdpa_ms": host["sdpa"], "min_ms": host["min"], "short": times}), flush=True)


def main():
    results = {name: [] for name in SOURCES}
    for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 4):
        for name in (list(SOURCES) if i % 2 == 0 else list(reversed(SOURCES))):
            env = dict(os.environ, PYTHONPATH=SOURCES[name])
            out = subprocess.run([sys.executable, __file__, "child"], env=env, capture_output=True, text=True)
            line = [x for x in out.stdout.splitlines() if x.startswith("{")]
            if not line:
                print(name, "failed:", out.stderr[-2000:], flush=True)
                continue
            row = json.loads(line[-1])
            results[name].append(row)
            short = statistics.median(a / b for a, b in zip(row["short"]["ours"], row["short"]["cudnn"]))
            print(f"{name:6s} host ratio {row['host_ratio']:.3f} ({row['host_ms']:.3f} vs {row['sdpa_ms']:.3f} ms)"
                  f"  (8,16,1024,64) ours/cudnn {short:.3f}  ours {row['short']['ours']}  {row['source']}", flush=True)
    for name, rows in results.items():
        print(name, "median host ratio", statistics.median(r["host_ratio"] for r in rows), flush=True)
    json.dump(results, open(os.path.join(os.environ.get("OUT", "/tmp"), "host_two.json"), "w"), indent=1)


if __name__ == "__main__":
    child() if sys.argv[1:] == ["child"] else main()
