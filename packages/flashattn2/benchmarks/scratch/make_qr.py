"""scratch (v171): a copy of the package's Hopper forward whose head-dim-64 (in-turn) consumers read their Q tile
into registers once per item and take S = Q K^T with A from registers (gf_qr.py); gf_qrf.py, the same with\nthe row sums by FADD."""

import os

here = os.path.dirname(os.path.abspath(__file__))
src = open(os.path.join(here, "../../src/flashattn2/_gluon_forward.py")).read()
edits = [
    (
        """    acc = warpgroup_mma_init(gl.zeros([ROWS, HEAD_DIM], gl.float32, o_layout))
    for j in range(n_kv):
        slot = (base + j) % STAGES""",
        """    acc = warpgroup_mma_init(gl.zeros([ROWS, HEAD_DIM], gl.float32, o_layout))
    q_a = q.load(gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2))
    for j in range(n_kv):
        slot = (base + j) % STAGES""",
    ),
    (
        """        s = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        s = warpgroup_wait(num_outstanding=0, deps=(s,))
        p, alpha, m_i = _softmax(s, j, m_i, softmax_args, CAUSAL, NEGATIVE_SCALE, BLOCK_N)""",
        """        s = warpgroup_mma(q_a, k_smem.index(slot).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        s = warpgroup_wait(num_outstanding=0, deps=(s,))
        p, alpha, m_i = _softmax(s, j, m_i, softmax_args, CAUSAL, NEGATIVE_SCALE, BLOCK_N)""",
    ),
]
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
with open(os.path.join(here, "gf_qr.py"), "w") as f:
    f.write(src)
# gf_qrf.py: the same with the row sums by FADD (v159 (a)) rather than P @ ones, whose P operand takes registers
old = "MMA_ROW_SUMS: gl.constexpr = HEAD_DIM <= MMA_ROW_SUMS_MAX_HEAD_DIM"
assert src.count(old) == 1
with open(os.path.join(here, "gf_qrf.py"), "w") as f:
    f.write(src.replace(old, "MMA_ROW_SUMS: gl.constexpr = False"))
