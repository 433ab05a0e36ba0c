"""scratch (v179): gb_sep's backward compiled offline for sm_90a through offline_compile.compile_all."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import offline_compile  # noqa: E402 (sets nothing until compile_all)

import flashattn2  # noqa: E402

MOD = os.environ.get("MOD", "gb_sep")
if MOD != "pkg":
    import importlib

    flashattn2._gluon_backward = importlib.import_module(MOD)
    sys.modules["flashattn2._gluon_backward"] = flashattn2._gluon_backward
shapes = json.loads(os.environ.get("SHAPES", "[[[1,16,16384,64],16,true],[[4,16,4096,64],16,false]]"))
for row in offline_compile.compile_all(os.environ.get("DUMP"), shapes, backward_only=True):
    if row.get("kernel") == "_hopper_backward_kernel":
        print(MOD, row["shape"], row["causal"], row.get("cubin"), row.get("ptxas"), row.get("error", "")[-400:])
