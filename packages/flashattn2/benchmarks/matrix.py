"""flashattn2 against SDPA's cuDNN and FLASH backends, side by side, in one process.

Usage (CUDA GPU, repository root)::

    PYTHONPATH=packages/flashattn2/src python packages/flashattn2/benchmarks/matrix.py --out matrix.json
    PYTHONPATH=packages/flashattn2/src python packages/flashattn2/benchmarks/matrix.py --graph --out graph.json
    PYTHONPATH=packages/flashattn2/src python packages/flashattn2/benchmarks/matrix.py --first-call --out first.json
    PYTHONPATH=packages/flashattn2/src python packages/flashattn2/benchmarks/matrix.py --host --out host.json

Default mode: for each shape, forward and forward+backward times
(``triton.testing.do_bench`` median) of flashattn2, SDPA CUDNN_ATTENTION, SDPA
FLASH_ATTENTION, and what PyTorch runs when asked for determinism
(``torch.use_deterministic_algorithms(True)``: SDPA's default choice, which is
then FLASH in its deterministic mode, cuDNN refusing), with the ratios
cuDNN/ours and FLASH/ours (> 1: flashattn2 faster). Inputs are random bf16;
every implementation sees the same tensors. Each is timed in ``--rounds``
rounds, the order of the implementations reversed every other round: at the
GPU's power cap its clock drifts with what ran before, so a single pass favours
whoever runs first. Times are the rounds' medians; ratios, the medians of the
rounds' ratios.

``--graph``: the same, but each pass is captured in a CUDA graph and replayed
(``triton.testing.do_bench_cudagraph`` median): the GPU's time alone, without the
host's work per call, which decides short sequences' eager times.

``--first-call``: the wall time of the first forward and the first backward in a
fresh process with an empty ``TRITON_CACHE_DIR`` (compilation included), per
dtype and shape.

``--host``: wall time per eager forward+backward call at a tiny shape, where the
host's work is the whole cost: flashattn2 against SDPA (its default backend
choice), in many short alternating rounds; the ratio is the median of the rounds'
ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashattn2
from flashattn2 import flash_attention

# (B, H, Hkv, N, D, causal): the four shapes, then GQA and wide heads.
SHAPES = [
    (1, 16, 16, 16384, 64, True),
    (4, 16, 16, 4096, 128, True),
    (4, 16, 16, 4096, 128, False),
    (8, 16, 16, 1024, 64, True),
    (2, 32, 8, 4096, 128, True),
    (2, 16, 16, 4096, 256, True),
    (2, 16, 16, 4096, 256, False),
]
HOST_SHAPE = (1, 4, 4, 128, 64, True)
FIRST_CALL_SHAPES = {  # dtype -> shapes; fp32 (B, N, D) = (4, 128, 64) is the CS336 public tests' shape
    # the second: the Hopper backward; the third (the host-time shape): the backward as one launch
    "bf16": [(8, 16, 16, 1024, 64, True), (1, 16, 16, 16384, 64, True), HOST_SHAPE],
    "fp16": [(8, 16, 16, 1024, 64, True)],
    "fp32": [(4, 1, 1, 128, 64, True), (4, 1, 1, 128, 64, False)],
}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def forward_flops(b, h, n, d, causal) -> float:
    """Matrix FLOPs of the forward (two N x N x D products per head; half when causal)."""
    return 4 * b * h * n * n * d / (2 if causal else 1)


def sdpa(q, k, v, causal):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=k.shape[1] != q.shape[1])


@contextlib.contextmanager
def torch_deterministic():
    """``torch.use_deterministic_algorithms(True)`` inside, as a user who needs reproducible gradients sets it."""
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(False)


def implementations() -> dict:
    """name -> (attention function, the context it runs in)."""
    return {
        "flashattn2": (lambda q, k, v, causal: flash_attention(q, k, v, causal=causal), contextlib.nullcontext),
        "cudnn": (sdpa, lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION)),
        "flash": (sdpa, lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)),
        "torch_deterministic": (sdpa, torch_deterministic),
    }


def inputs(shape, dtype=torch.bfloat16):
    b, h, hkv, n, d, _ = shape
    q = torch.randn(b, h, n, d, device="cuda", dtype=dtype, requires_grad=True)
    k, v = (torch.randn(b, hkv, n, d, device="cuda", dtype=dtype, requires_grad=True) for _ in range(2))
    return q, k, v, torch.randn_like(q)


def time_ms(fn, graph: bool = False) -> float:
    """Median ms per call of ``fn``: eager calls, or (``graph``) replays of a CUDA graph that captured it."""
    if graph:  # ten replays of a graph of about 40 ms of calls
        return triton.testing.do_bench_cudagraph(fn, rep=40, return_mode="median")
    return triton.testing.do_bench(fn, warmup=100, rep=400, return_mode="median")


MODES = ("fwd_ms", "fwd_bwd_ms")
REFERENCES = ("cudnn", "flash")  # the ratios' numerators


def passes(fn, context, q, k, v, g, causal) -> dict:
    """mode -> the callable that runs it: the forward alone (on inputs that do not require grad, as in
    inference: flashattn2 prepares no backward for them), or forward and backward."""
    q_inference, k_inference, v_inference = (x.detach() for x in (q, k, v))

    def forward():
        with torch.no_grad(), context():
            fn(q_inference, k_inference, v_inference, causal)

    def forward_backward():
        with context():
            torch.autograd.grad(fn(q, k, v, causal), (q, k, v), g)

    return {"fwd_ms": forward, "fwd_bwd_ms": forward_backward}


def matrix(shapes, rounds: int = 3, graph: bool = False) -> list[dict]:
    """One row per shape: each implementation's medians per mode, its rounds, and the ratios to flashattn2
    (``graph``: timed as CUDA-graph replays)."""
    impls = implementations()
    rows = []
    for shape in shapes:
        q, k, v, g = inputs(shape)
        causal = shape[-1]
        calls = {name: passes(fn, context, q, k, v, g, causal) for name, (fn, context) in impls.items()}
        samples = {name: {mode: [] for mode in MODES} for name in impls}
        errors = {}
        for r in range(rounds):
            for name in list(impls) if r % 2 == 0 else list(impls)[::-1]:
                if name in errors:
                    continue
                try:
                    for mode in MODES:
                        samples[name][mode].append(time_ms(calls[name][mode], graph))
                except RuntimeError as error:  # a backend that refuses the shape (e.g. FLASH with D = 256)
                    errors[name] = str(error).splitlines()[0][:120]
        row = {"shape": shape, "rounds": rounds, "graph": graph}
        for name in impls:
            if name in errors:
                row[name] = {"error": errors[name]}
                continue
            row[name] = {mode: statistics.median(samples[name][mode]) for mode in MODES}
            row[name]["per_round"] = samples[name]
        row["ratios"] = {  # ref time / ours, per round, then the median
            ref: {
                mode: statistics.median(t / o for t, o in zip(samples[ref][mode], samples["flashattn2"][mode]))
                for mode in MODES
            }
            for ref in REFERENCES
            if ref not in errors
        }
        ours = row["flashattn2"]
        flops = forward_flops(shape[0], shape[1], shape[3], shape[4], causal)
        ours["fwd_tflops"] = flops / ours["fwd_ms"] / 1e9
        ours["fwd_bwd_tflops"] = 3.5 * flops / ours["fwd_bwd_ms"] / 1e9  # backward counted as 2.5 forwards
        rows.append(row)
        print_row(row, flush=True)
    return rows


def print_row(row, flush=False) -> None:
    b, h, hkv, n, d, causal = row["shape"]
    label = f"{b},{h}/{hkv},{n},{d},{'causal' if causal else 'full'}"
    for mode in ("fwd_ms", "fwd_bwd_ms"):
        cells = []
        for name in ("flashattn2", "cudnn", "flash", "torch_deterministic"):
            cell = row[name]
            cells.append(f"{cell[mode]:9.3f}" if mode in cell else f"{'-':>9}")
        ratios = [f"{row['ratios'][ref][mode]:6.2f}" if ref in row["ratios"] else f"{'-':>6}" for ref in REFERENCES]
        print(f"{label:26} {mode[:-3]:8}" + "".join(cells) + "  " + " ".join(ratios), flush=flush)


def first_call_child(dtype_name: str, shape) -> None:
    """In a fresh process: time the first forward and backward (compilation included)."""
    q, k, v, g = inputs(shape, DTYPES[dtype_name])
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = flash_attention(q, k, v, causal=shape[-1])
    torch.cuda.synchronize()
    forward_s = time.perf_counter() - start
    start = time.perf_counter()
    out.backward(g)
    torch.cuda.synchronize()
    print(json.dumps({"forward_s": forward_s, "backward_s": time.perf_counter() - start}))


def first_calls() -> list[dict]:
    rows = []
    for dtype_name, shapes in FIRST_CALL_SHAPES.items():
        for shape in shapes:
            with tempfile.TemporaryDirectory() as cache:
                env = {**os.environ, "TRITON_CACHE_DIR": cache}
                child = subprocess.run(
                    [sys.executable, __file__, "--first-call-child", dtype_name, json.dumps(shape)],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
            row = {"dtype": dtype_name, "shape": shape, **json.loads(child.stdout.splitlines()[-1])}
            rows.append(row)
            print(
                f"first call {dtype_name} {shape}: forward {row['forward_s']:.2f} s, "
                f"backward {row['backward_s']:.2f} s",
                flush=True,
            )
    return rows


def host_ms(fn, reps: int, warmup: int = 20) -> float:
    """Milliseconds per call of ``fn``: ``reps`` calls enqueued back to back after ``warmup``
    calls, timed from the first to the end of the last on the GPU (the host's work when
    the GPU keeps up)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / reps * 1e3


def host_times(reps: int = 50, rounds: int = 41) -> dict:
    """Milliseconds per eager forward+backward call at ``HOST_SHAPE``, flashattn2 against SDPA.

    ``rounds`` rounds, each timing ``reps`` calls of both implementations back to back,
    in alternating order. Host time on a shared machine drifts by half within seconds, so
    the ratio is the median of the rounds' ratios: each compares calls made within a few
    milliseconds of each other. Also reported: each implementation's median and minimum
    over the rounds, and the ratio of the minimums (the calls least disturbed)."""
    q, k, v, g = inputs(HOST_SHAPE)
    causal = HOST_SHAPE[-1]
    ways = {
        "flashattn2": lambda: torch.autograd.grad(flash_attention(q, k, v, causal=causal), (q, k, v), g),
        "sdpa": lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=causal), (q, k, v), g),
    }
    samples = {name: [] for name in ways}
    for round_index in range(rounds):
        for name in sorted(ways, reverse=round_index % 2 == 1):
            samples[name].append(host_ms(ways[name], reps))
    ratios = [ours / theirs for ours, theirs in zip(samples["flashattn2"], samples["sdpa"])]
    result = {name: statistics.median(times) for name, times in samples.items()}
    result["min"] = {name: min(times) for name, times in samples.items()}
    result["ratio"] = statistics.median(ratios)
    result["ratio_of_minimums"] = result["min"]["flashattn2"] / result["min"]["sdpa"]
    result["samples_ms"] = samples
    print(
        f"host, eager fwd+bwd at {HOST_SHAPE}: flashattn2 {result['flashattn2']:.3f} ms/call, "
        f"sdpa {result['sdpa']:.3f} ms/call (medians of {rounds} rounds); ratio {result['ratio']:.2f} "
        f"(median of the rounds' ratios), {result['ratio_of_minimums']:.2f} (of the minimums)",
        flush=True,
    )
    return result


def environment() -> dict:
    return {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "python": platform.python_version(),
        "flashattn2": flashattn2.__version__,
        "date": time.strftime("%Y-%m-%d"),
    }


def write_rows(path: str, rows: list[dict]) -> None:
    """Write a benchmark's rows with the :func:`environment` they were measured in, as JSON."""
    with open(path, "w") as f:
        json.dump({"env": environment(), "rows": rows}, f, indent=1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--first-call", action="store_true", help="time first calls in fresh processes")
    mode.add_argument("--host", action="store_true", help="time host work per call at a tiny shape")
    mode.add_argument("--graph", action="store_true", help="time CUDA-graph replays: the GPU's time alone")
    mode.add_argument("--first-call-child", nargs=2, metavar=("DTYPE", "SHAPE"), help=argparse.SUPPRESS)
    parser.add_argument("--shapes", type=json.loads, help="JSON list of [B, H, Hkv, N, D, causal] (default: built in)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating timing rounds per shape (default 3)")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    if args.first_call_child:
        first_call_child(args.first_call_child[0], json.loads(args.first_call_child[1]))
        return 0
    results = {"env": environment(), "command": " ".join([os.path.basename(sys.executable), *sys.argv])}
    print(results["env"], flush=True)
    if args.first_call:
        results["first_calls"] = first_calls()
    elif args.host:
        results["host"] = host_times()
    else:
        print(
            f"{'shape (B,H/Hkv,N,D)':26} {'pass':8}{'ours':>9}{'cuDNN':>9}{'FLASH':>9}{'det.':>9}  "
            f"cuDNN/ours FLASH/ours",
            flush=True,
        )
        shapes = [tuple(s) for s in args.shapes] if args.shapes else SHAPES
        results["rows"] = matrix(shapes, args.rounds, args.graph)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
