"""Scratch: gf_skT.py = the package's Hopper forward whose O rescale is skipped by a warp when no row of the warp
has a new maximum; a row's maximum moves only when it grows by more than T (base 2; T = 0: every growth)."""
import sys

T = int(sys.argv[1])
PACK = 16
src = open("gf_head.py").read()
lines = ["{", ".reg .pred need, any;", ".reg .f32 prod;"]
# need = some alpha of this thread differs from 1; the alphas are operands PACK+PACK .. 3*PACK-1 (after the acc operands)
lines.append(f"setp.neu.f32 need, ${2 * PACK}, 0f3F800000;")
for i in range(1, PACK):
    lines.append(f"setp.neu.or.f32 need, ${2 * PACK + i}, 0f3F800000, need;")
lines += [f"mov.b32 ${i}, ${PACK + i};" for i in range(PACK)]
lines += ["vote.sync.any.pred any, need, 0xffffffff;", "@!any bra SKIP;"]
lines += [f"mul.f32 ${i}, ${i}, ${2 * PACK + i};" for i in range(PACK)]
lines += ["SKIP:", "}"]
asm = "\\n".join(lines)
cons = ",".join(["=f"] * PACK + ["f"] * (2 * PACK))
helper = f'''
RESCALE_ASM = gl.constexpr("{asm}")
RESCALE_CONSTRAINTS = gl.constexpr("{cons}")
RESCALE_PACK = gl.constexpr({PACK})
GROWTH_THRESHOLD = gl.constexpr({T}.0)


@gluon.jit
def _rescale_rows(acc, alpha):
    """acc * alpha, skipped by a warp whose alphas are all 1."""
    return gl.inline_asm_elementwise(
        RESCALE_ASM, RESCALE_CONSTRAINTS, [acc, alpha], dtype=gl.float32, is_pure=True, pack=RESCALE_PACK
    )

'''
src = src.replace("\n\n@gluon.jit\ndef _key_tiles", helper + "\n@gluon.jit\ndef _key_tiles", 1)
for old, new in [
    ("m_new = gl.maximum(m_i, gl.max(s2, 1))", "m_new = gl.maximum(m_i, gl.max(s2, 1))\n            m_new = gl.where(m_new > m_i + GROWTH_THRESHOLD, m_new, m_i)"),
    ("m_new = gl.maximum(m_i, raw_max * qk_scale_log2)", "m_new = gl.maximum(m_i, raw_max * qk_scale_log2)\n            m_new = gl.where(m_new > m_i + GROWTH_THRESHOLD, m_new, m_i)"),
    ("        acc = acc * gl.convert_layout(alpha, o_row_layout)[:, None]\n", ""),
    ("        acc = warpgroup_mma(p_op, v_smem", "        acc = _rescale_rows(acc, gl.convert_layout(alpha, o_row_layout)[:, None])\n        acc = warpgroup_mma(p_op, v_smem"),
]:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
open(f"gf_sk{T}.py", "w").write(src)
