"""scratch (v170): copies of the package's Hopper backward whose head-dim-64 consumers take A operands from
registers: gb_rs_dk.py (dK = dS^T Q with dS^T from registers, not from the dS buffer), gb_rs_kv.py (S^T = K Q^T and
dP^T = V dO^T with this warpgroup's K and V rows loaded into registers once per item), gb_rs_both.py (both)."""

import os

here = os.path.dirname(os.path.abspath(__file__))
src = open(os.path.join(here, "../../src/flashattn2/_gluon_backward.py")).read()

kv_load_old = """    keys = n * BLOCK_N + WARPGROUP * KEYS + gl.arange(0, KEYS, layout=row_layout)
    key_ok = keys < n_ctx
    steps = _steps(n, q_tiles, key_tiles, CAUSAL, RATIO)
    mbarrier.wait(kv_bar, phase)
    for _head"""
kv_load_new = """    keys = n * BLOCK_N + WARPGROUP * KEYS + gl.arange(0, KEYS, layout=row_layout)
    key_ok = keys < n_ctx
    steps = _steps(n, q_tiles, key_tiles, CAUSAL, RATIO)
    mbarrier.wait(kv_bar, phase)
    if HEAD_DIM == 64:
        k_a = k_mine.load(a_layout)
        v_a = v_mine.load(a_layout)
    else:
        k_a = k_mine
        v_a = v_mine
    for _head"""
st_old = """                    st = warpgroup_mma(k_mine, q_h.permute((1, 0)), zero_st, use_acc=False, is_async=True)
                    dpt = warpgroup_mma(v_mine, do_h.permute((1, 0)), zero_st, use_acc=False, is_async=True)"""
st_new = """                    st = warpgroup_mma(k_a, q_h.permute((1, 0)), zero_st, use_acc=False, is_async=True)
                    dpt = warpgroup_mma(v_a, do_h.permute((1, 0)), zero_st, use_acc=False, is_async=True)"""
dk_old = "                    dk = warpgroup_mma(ds_h, q_h, dk, is_async=True)"
dk_new = """                    if HEAD_DIM == 64:
                        dk = warpgroup_mma(gl.convert_layout(dst, a_layout), q_h, dk, is_async=True)
                    else:
                        dk = warpgroup_mma(ds_h, q_h, dk, is_async=True)"""
for old in (kv_load_old, st_old, dk_old):
    assert src.count(old) == 1, old
variants = {
    "gb_rs_dk.py": [(dk_old, dk_new)],
    "gb_rs_kv.py": [(kv_load_old, kv_load_new), (st_old, st_new)],
    "gb_rs_both.py": [(kv_load_old, kv_load_new), (st_old, st_new), (dk_old, dk_new)],
}
for name, edits in variants.items():
    text = src
    for old, new in edits:
        text = text.replace(old, new)
    with open(os.path.join(here, name), "w") as f:
        f.write(text)
    print(name)
