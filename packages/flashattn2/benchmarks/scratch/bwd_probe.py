"""scratch (v167): the package's forward and forward+backward against cuDNN's forward+backward, CUDA-graph replays,
one round per process; run under Triton 3.6, 3.9, and 3.9 with 3.6's ptxas (TRITON_PTXAS_BLACKWELL_PATH) in
alternating processes. Appends one JSON line to $OUT/probe.jsonl."""

import json
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from matrix import implementations, inputs, passes, time_ms

SHAPES = [
    (1, 16, 16, 16384, 64, True),
    (4, 16, 16, 4096, 128, True),
    (4, 16, 16, 4096, 128, False),
    (2, 32, 8, 4096, 128, True),
    (2, 16, 16, 4096, 256, True),
    (2, 16, 16, 4096, 256, False),
    (8, 16, 16, 1024, 64, True),
]

if __name__ == "__main__":
    impls = implementations()
    rows = []
    for shape in SHAPES:
        q, k, v, g = inputs(shape)
        ours = passes(*impls["flashattn2"], q, k, v, g, shape[-1])
        cudnn = passes(*impls["cudnn"], q, k, v, g, shape[-1])
        row = {
            "shape": shape,
            "fwd": time_ms(ours["fwd_ms"], True),
            "fwd_bwd": time_ms(ours["fwd_bwd_ms"], True),
            "cudnn_fwd_bwd": time_ms(cudnn["fwd_bwd_ms"], True),
        }
        row["bwd"] = row["fwd_bwd"] - row["fwd"]
        row["ratio"] = row["cudnn_fwd_bwd"] / row["fwd_bwd"]
        print(sys.argv[1], shape, {k_: round(x, 4) for k_, x in row.items() if k_ != "shape"}, flush=True)
        rows.append(row)
    ptxas = os.environ.get("TRITON_PTXAS_BLACKWELL_PATH", "")
    line = {"tag": sys.argv[1], "triton": triton.__version__, "ptxas": ptxas, "rows": rows}
    with open(os.path.join(os.environ["OUT"], "probe.jsonl"), "a") as fh:
        fh.write(json.dumps(line) + "\n")
