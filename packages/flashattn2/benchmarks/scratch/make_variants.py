"""Generate scratch Hopper forward variants from the package's _gluon_forward.py."""
import re, sys
SRC = "packages/flashattn2/src/flashattn2/_gluon_forward.py"  # run from the repository root
DST = "packages/flashattn2/benchmarks/scratch/"
base = open(SRC).read()

def sub(s, old, new, count=1):
    assert s.count(old) == count, (old, s.count(old))
    return s.replace(old, new)

def qreg(s):
    s = sub(s, "    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)\n",
            "    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)\n"
            "    q_op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2)\n")
    s = sub(s, "    mbarrier.wait(q_bar, 0)\n    for j in", "    mbarrier.wait(q_bar, 0)\n    q_op = q.load(q_op_layout)\n    for j in")
    s = sub(s, "s = warpgroup_mma(q, k_smem", "s = warpgroup_mma(q_op, k_smem")
    return s

def turn_common(s):
    # a tiles variable for the loop
    s = sub(s, "    mbarrier.wait(q_bar, 0)\n", "    mbarrier.wait(q_bar, 0)\n    tiles = _key_tiles(m_tile, n_ctx, CAUSAL)\n")
    s = sub(s, "    for j in range(_key_tiles(m_tile, n_ctx, CAUSAL)):\n        slot = j % STAGES\n        acc = warpgroup_mma_wait",
            "    for j in range(tiles):\n        slot = j % STAGES\n        acc = warpgroup_mma_wait")
    return s

def turn_mbar(s):
    s = turn_common(s)
    s = sub(s, "        kv_empty,\n        b,\n        h,\n        heads,", "        kv_empty,\n        turn_bar,\n        b,\n        h,\n        heads,", 2)
    s = sub(s, "    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())\n",
            "    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())\n"
            "    turn_bar = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())\n"
            "    mbarrier.init(turn_bar.index(0), count=1)\n    mbarrier.init(turn_bar.index(1), count=1)\n")
    s = re.sub(r"( +)s = warpgroup_mma\((q\w*), k_smem(.*)\n",
               lambda m: (f"{m[1]}if WARPGROUP == 1:\n{m[1]}    mbarrier.wait(turn_bar.index(1), j & 1)\n"
                          f"{m[1]}elif j > 0:\n{m[1]}    mbarrier.wait(turn_bar.index(0), (j - 1) & 1)\n"
                          f"{m[1]}s = warpgroup_mma({m[2]}, k_smem{m[3]}\n{m[1]}mbarrier.arrive(turn_bar.index(1 - WARPGROUP))\n"), s)
    return s

NB = '''

@gluon.constexpr_function
def _bar_asm(bar_id, arrive):
    return ("bar.arrive " if arrive else "bar.sync ") + str(bar_id) + ", 256; mov.u32 $0, $1;"


@gluon.jit
def _bar(bar_id: gl.constexpr, arrive: gl.constexpr):
    """All 128 threads of this warpgroup: arrive on (or wait at) named barrier bar_id with 256 threads."""
    token = gl.full([1], 0, gl.int32, gl.BlockedLayout([1], [32], [4], [0]))
    gl.inline_asm_elementwise(_bar_asm(bar_id, arrive), "=r,r", [token], gl.int32, is_pure=False, pack=1)

'''

def turn_named(s):
    s = turn_common(s)
    s = sub(s, "\n\n@gluon.jit\ndef _consumer(", NB + "\n@gluon.jit\ndef _consumer(")
    s = re.sub(r"( +)s = warpgroup_mma\((q\w*), k_smem(.*)\n",
               lambda m: (f"{m[1]}if WARPGROUP == 1 or j > 0:\n{m[1]}    _bar(10 + WARPGROUP, False)\n"
                          f"{m[1]}s = warpgroup_mma({m[2]}, k_smem{m[3]}\n"
                          f"{m[1]}if WARPGROUP == 0 or j < tiles - 1:\n{m[1]}    _bar(11 - WARPGROUP, True)\n"), s)
    return s

variants = {"gf_qreg": [qreg], "gf_turn": [turn_mbar], "gf_turn_nb": [turn_named],
            "gf_qreg_turn": [qreg, turn_mbar], "gf_qreg_turn_nb": [qreg, turn_named]}
for name, fs in variants.items():
    s = base
    for f in fs:
        s = f(s)
    open(DST + name + ".py", "w").write(s)
    print(name)
