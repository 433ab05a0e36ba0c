"""Prepared for the next session (v112's route): the Hopper backward's causal epilogue launched as the kernel's
programmatic dependent (as shipped, "on") or plainly ("off"), against cuDNN, eager or as CUDA-graph replays.

    # repository root, GPU machine, PYTHONPATH=packages/flashattn2/src; alternate the processes:
    for i in 1 2; do for m in on off; do python packages/flashattn2/benchmarks/scratch/ab_pdl.py $m; done; done
    for m in on off; do python packages/flashattn2/benchmarks/scratch/ab_pdl.py $m --graph; done

Each process prints one JSON line per shape: forward+backward medians of three alternating rounds (ours, cuDNN)
and the median of the rounds' ratios cuDNN/ours."""

import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import matrix  # noqa: E402
import triton  # noqa: E402

from flashattn2 import _launch  # noqa: E402

if sys.argv[1] == "off":
    plain = _launch.CompiledLaunch.__init__

    def without_pdl(self, *args, launch_pdl=False, **kwargs):
        plain(self, *args, launch_pdl=False, **kwargs)

    _launch.CompiledLaunch.__init__ = without_pdl
GRAPH = "--graph" in sys.argv
# the matrix's shapes, then v112's mid shapes (causal ones first: only they launch the epilogue as a dependent)
SHAPES = [s for s in matrix.SHAPES if s[-1]] + [
    (2, 16, 16, 1024, 128, True),
    (1, 16, 16, 2048, 128, True),
    (4, 16, 16, 2048, 64, True),
    (1, 16, 16, 4096, 128, True),
    (4, 16, 16, 1024, 128, False),
]
impls = matrix.implementations()
for shape in SHAPES:
    q, k, v, g = matrix.inputs(shape)
    calls = {name: matrix.passes(*impls[name], q, k, v, g, shape[-1]) for name in ("flashattn2", "cudnn")}
    for name in calls:  # plans built, kernels compiled, before any capture
        calls[name]["fwd_ms"]()
        calls[name]["fwd_bwd_ms"]()
    t = {name: [] for name in calls}
    for r in range(3):
        for name in list(calls) if r % 2 == 0 else list(calls)[::-1]:
            t[name].append(matrix.time_ms(calls[name]["fwd_bwd_ms"], GRAPH))
    ratio = statistics.median(c / o for c, o in zip(t["cudnn"], t["flashattn2"]))
    print(json.dumps({"pdl": sys.argv[1], "graph": GRAPH, "shape": shape, "ours": t["flashattn2"],
                      "cudnn": t["cudnn"], "cudnn/ours": round(ratio, 3), "triton": triton.__version__}), flush=True)
