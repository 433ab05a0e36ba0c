"""The Hopper kernels against the Triton kernels at short causal/full shapes below MIN_SEQ_LEN, through the
package's dispatch (hopper_kernels.kernel_ms, 5 alternating rounds)."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from hopper_kernels import kernel_ms

from flashattn2._hopper import SWITCHES, below_thresholds

CASES = {
    "forward": [((16, 16, 512, 128), True), ((16, 16, 512, 128), False), ((2, 16, 512, 128), True),
                ((4, 16, 512, 256), True), ((2, 8, 512, 256), True), ((16, 16, 256, 128), False)],
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
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "2026-11-27-h100-s23-short-thresholds-4.json"), "w"), indent=1)
