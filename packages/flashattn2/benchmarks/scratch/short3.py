"""The Hopper kernels against the Triton kernels at short causal/full shapes below MIN_SEQ_LEN, through the
package's dispatch (hopper_kernels.kernel_ms, 5 alternating rounds)."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from hopper_kernels import kernel_ms

from flashattn2._hopper import SWITCHES, below_thresholds

CASES = {
    "backward": [((2, 16, 1024, 64), False), ((1, 8, 2048, 64), False), ((2, 8, 1024, 64), False),
                 ((4, 16, 512, 64), False), ((8, 16, 512, 64), False), ((16, 16, 512, 64), False),
                 ((1, 8, 2048, 128), False), ((2, 8, 2048, 128), False), ((2, 16, 1024, 128), False),
                 ((4, 16, 512, 128), False), ((8, 16, 1024, 64), True), ((1, 16, 2048, 64), True),
                 ((1, 8, 2048, 64), True), ((128, 16, 256, 64), False)],
    "forward": [((1, 8, 2048, 64), True), ((1, 16, 2048, 64), True), ((1, 16, 1024, 64), True),
                ((2, 16, 1024, 64), True), ((8, 16, 1024, 64), True), ((1, 4, 4096, 64), True),
                ((1, 8, 4096, 64), True), ((1, 16, 1024, 128), True), ((1, 8, 1024, 128), False),
                ((2, 8, 1024, 128), True), ((1, 16, 1024, 256), True)],
}
out = {}
with below_thresholds():
    for kernel, cases in CASES.items():
        rows = []
        for shape, causal in cases:
            row = kernel_ms(kernel, shape, causal, rounds=5)
            print(kernel, row, flush=True)
            rows.append(row)
        os.environ.pop(SWITCHES[kernel])
        out[kernel] = rows
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "2026-11-27-h100-s23-short-thresholds-3.json"), "w"), indent=1)
