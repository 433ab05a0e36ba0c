"""The Hopper forward against the Triton forward at non-causal shapes below and around MIN_SEQ_LEN, through the
package's dispatch (hopper_kernels.kernel_ms, 5 alternating rounds)."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from hopper_kernels import kernel_ms

from flashattn2._hopper import SWITCHES, below_thresholds

rows = []
with below_thresholds():
    for shape in [(8, 16, 512, 128), (32, 16, 512, 128), (8, 16, 1024, 128), (8, 16, 512, 64), (32, 12, 512, 64),
                  (8, 16, 1024, 64), (16, 16, 1024, 64), (4, 16, 2048, 64), (8, 16, 2048, 64), (2, 16, 4096, 64)]:
        row = kernel_ms("forward", shape, False, rounds=5)
        print(row, flush=True)
        rows.append(row)
os.environ.pop(SWITCHES["forward"])
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "2026-11-27-h100-s22-v89-forward-thresholds-full.json"), "w"), indent=1)
