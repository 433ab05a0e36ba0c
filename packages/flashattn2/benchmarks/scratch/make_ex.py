"""scratch (session 39): gf_exN.py = the package's Hopper forward with one exponential in N of the unmasked tiles
computed by a degree-3 polynomial on the FMA pipe instead of MUFU.EX2 (v70's, after commit e0649a9's make_ex.py),
for the three-consumer forward. python make_ex.py N"""
import sys

src = open("../../src/flashattn2/_gluon_forward.py").read()
helper = '''
# 2^f on [-0.5, 0.5], degree 3, minimax in relative error (v70: 7.5e-5 in float32 Horner).
EX2_POLY = ("0f3D61FB71", "0f3E786EF8", "0f3F31798D", "0f3F7FFB4A")


def _ex2_asm(n):
    """PTX for n exponentials: the first n - 1 on MUFU, the last by Cody-Waite reduction and EX2_POLY."""
    lines = [f"ex2.approx.ftz.f32 ${i}, ${n + i};" for i in range(n - 1)]
    c3, c2, c1, c0 = EX2_POLY
    lines += [
        "{", ".reg .f32 x, t, j, p;", ".reg .b32 tb, pb;",
        f"max.ftz.f32 x, ${2 * n - 1}, 0fC2FC0000;",
        "add.rn.ftz.f32 t, x, 0f4B400000;",
        "sub.rn.ftz.f32 j, t, 0f4B400000;",
        "sub.rn.ftz.f32 x, x, j;",
        f"fma.rn.ftz.f32 p, x, {c3}, {c2};", f"fma.rn.ftz.f32 p, p, x, {c1};", f"fma.rn.ftz.f32 p, p, x, {c0};",
        "mov.b32 tb, t;", "mov.b32 pb, p;", "shl.b32 tb, tb, 23;", "add.s32 pb, pb, tb;", f"mov.b32 ${n - 1}, pb;", "}",
    ]
    return "\\n".join(lines)


EX2_ONE_IN = gl.constexpr(%d)
EX2_ASM = gl.constexpr(_ex2_asm(%d))
EX2_CONSTRAINTS = gl.constexpr(",".join(["=f"] * %d + ["f"] * %d))


@gluon.jit
def _exp2_mixed(x):
    return gl.inline_asm_elementwise(EX2_ASM, EX2_CONSTRAINTS, [x], dtype=gl.float32, is_pure=True, pack=EX2_ONE_IN)

'''
n = int(sys.argv[1])
helper = helper.replace("%d", str(n))
anchor = "\n\n@gluon.jit\ndef _softmax("
assert src.count(anchor) == 1
src = src.replace(anchor, helper + "\n@gluon.jit\ndef _softmax(", 1)
old = "        p = gl.exp2(s * qk_scale_log2 - m_new[:, None])\n    return p, gl.exp2(m_i - m_new), m_new"
assert src.count(old) == 1
src = src.replace(old, "        p = _exp2_mixed(s * qk_scale_log2 - m_new[:, None])\n    return p, gl.exp2(m_i - m_new), m_new")
open(f"gf_ex{n}.py", "w").write(f"# scratch (session 39): one exponential in {n} by a polynomial (make_ex.py)\n" + src)
