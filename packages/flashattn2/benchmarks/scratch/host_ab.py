"""Session 27 host A/B: (1) the compiled kernels launched through the C launcher directly (no CudaLauncher.__call__),
(2) allocation spellings. Micro costs first, then forward+backward at (1, 4, 128, 64) causal (host only) and
(8, 16, 1024, 64) causal (do_bench median, as matrix.py), patched and not, alternating rounds."""

import statistics
import time

import torch
import torch.nn.functional as F
import triton

from flashattn2 import _launch, flash_attention
from flashattn2 import _triton_forward as tf

ORIGINAL_CALL = _launch.CompiledLaunch.__call__


def direct_call(self, *tensors):
    direct = self.__dict__.get("direct")
    if direct is None:
        if self.kernel is None:
            return ORIGINAL_CALL(self, *tensors)
        run = self.kernel.run
        if run.global_scratch_size or run.profile_scratch_size:
            self.direct = False
        else:
            k = self.kernel
            self.direct = (run.launch, (k.function, run.launch_cooperative_grid, run.launch_pdl, None, None,
                                        k.packed_metadata, None, None, None))
        direct = self.direct
    if direct is False:
        return ORIGINAL_CALL(self, *tensors)
    hooks = triton.knobs.runtime
    if hooks.launch_enter_hook.calls or hooks.launch_exit_hook.calls:
        return ORIGINAL_CALL(self, *tensors)
    launch, head = direct
    grid = self.grid
    launch(grid[0], grid[1], grid[2], torch._C._cuda_getCurrentRawStream(self.device_index), *head, *tensors,
           *self.trailing)


def us(fn, reps=200):
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / reps * 1e6


def rounds(cases, n=15, reps=200, setup=None):
    samples = {name: [] for name in cases}
    for fn in cases.values():
        us(fn, 20)
    for r in range(n):
        for name in (list(cases) if r % 2 == 0 else list(reversed(cases))):
            if setup:
                setup(name)
            samples[name].append(us(cases[name], reps))
    for name, s in samples.items():
        print(f"  {name:34s} min {min(s):7.2f}  median {statistics.median(s):7.2f} us", flush=True)
    return samples


def main():
    q = torch.randn(1, 4, 128, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    shape, dt, dev = (1, 4, 128, 64), torch.bfloat16, q.device
    print("allocations", flush=True)
    rounds({
        "torch.empty(shape, dtype, device)": lambda: torch.empty(shape, dtype=dt, device=dev),
        "q.new_empty(shape)": lambda: q.new_empty(shape),
        "torch.empty_like(q)": lambda: torch.empty_like(q),
        "q.new_empty(shape, dtype=f32)": lambda: q.new_empty((1, 4, 128), dtype=torch.float32),
        "torch.empty_strided": lambda: torch.empty_strided(shape, (32768, 8192, 64, 1), dtype=dt, device=dev),
        "torch.empty((3,*s)).unbind(0)": lambda: torch.empty((3, *shape), dtype=dt, device=dev).unbind(0),
        "q.new_empty((3,*s)).unbind(0)": lambda: q.new_empty((3, *shape)).unbind(0),
    })
    scale = 0.125
    o, lse = tf.triton_forward(q, q, q, True, scale)
    launch = tf.plan_for(q, q, q, True, scale).launch
    direct = _launch.CompiledLaunch.__new__(_launch.CompiledLaunch)
    vars(direct).update(vars(launch))
    direct.__dict__.pop("direct", None)
    print("one forward launch", flush=True)
    rounds({
        "CompiledLaunch (package)": lambda: ORIGINAL_CALL(launch, q, q, q, o, lse),
        "direct C launcher": lambda: direct_call(direct, q, q, q, o, lse),
    })
    g = torch.randn_like(q)
    k, v = (torch.randn_like(q, requires_grad=True) for _ in range(2))

    def patch(name):
        _launch.CompiledLaunch.__call__ = direct_call if name.startswith("direct") else ORIGINAL_CALL

    print("tiny fwd+bwd (host)", flush=True)
    fb = lambda: torch.autograd.grad(flash_attention(q, k, v, causal=True), (q, k, v), g)  # noqa: E731
    sd = lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), g)  # noqa: E731
    s = rounds({"package": fb, "direct": fb, "sdpa": sd}, n=21, setup=patch)
    for name in ("package", "direct"):
        ratios = [a / b for a, b in zip(s[name], s["sdpa"])]
        print(f"  {name} / sdpa: median of rounds {statistics.median(ratios):.3f}", flush=True)
    print("(8, 16, 1024, 64) causal fwd+bwd, do_bench median ms", flush=True)
    q2, k2, v2 = (torch.randn(8, 16, 1024, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g2 = torch.randn_like(q2)
    res = {"package": [], "direct": [], "cudnn": []}
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            torch.autograd.grad(F.scaled_dot_product_attention(q2, k2, v2, is_causal=True), (q2, k2, v2), g2)

    ours = lambda: torch.autograd.grad(flash_attention(q2, k2, v2, causal=True), (q2, k2, v2), g2)  # noqa: E731
    for r in range(6):
        for name in (["package", "direct", "cudnn"] if r % 2 == 0 else ["cudnn", "direct", "package"]):
            patch(name)
            fn = cudnn if name == "cudnn" else ours
            res[name].append(triton.testing.do_bench(fn, warmup=100, rep=400, return_mode="median"))
    for name, t in res.items():
        print(f"  {name:10s} " + " ".join(f"{x:.3f}" for x in t) + f"  median {statistics.median(t):.3f}", flush=True)


if __name__ == "__main__":
    main()
