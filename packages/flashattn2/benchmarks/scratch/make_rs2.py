"""scratch (v172): copies of the package's Hopper backward (v170: K and V from registers at head dim 64, dS^T from
registers for dK without the mask) where causal items also take dK's dS^T from registers, and hold only one of K
(gb_c_k.py) or V (gb_c_v.py) in registers, so that the consumers' registers stay as v170's."""

import os

here = os.path.dirname(os.path.abspath(__file__))
src = open(os.path.join(here, "../../src/flashattn2/_gluon_backward.py")).read()
dk_old = "if HEAD_DIM == 64 and not CAUSAL:  # dS^T from registers too"
loads_old = """        k_a = k_mine.load(a_layout)
        v_a = v_mine.load(a_layout)"""
assert src.count(dk_old) == 1 and src.count(loads_old) == 1
src = src.replace(dk_old, "if HEAD_DIM == 64:  # dS^T from registers too")
for name, loads in {
    "gb_c_k.py": """        k_a = k_mine.load(a_layout)
        v_a = v_mine""",
    "gb_c_v.py": """        k_a = k_mine
        v_a = v_mine.load(a_layout)""",
}.items():
    with open(os.path.join(here, name), "w") as f:
        f.write(src.replace(loads_old, loads))
