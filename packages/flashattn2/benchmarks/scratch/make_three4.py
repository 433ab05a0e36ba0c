"""scratch (v174): a copy of the package's Hopper forward whose three consumers are three 4-warp partitions
(FlashAttention-3's arrangement: each consumer its own instruction stream, no barrier across two warpgroups) instead
of a 4-warp default consumer beside an 8-warp one: the 8-warp consumer's 128 Q rows (one TMA copy, as before) are
taken by two 4-warp consumers as two 64-row slices, each storing its O through the 64-row descriptor
(gf_three4.py). Registers: the two workers 144 each, the loader 64, the default consumer what is left (160)."""

import os

here = os.path.dirname(os.path.abspath(__file__))
src = open(os.path.join(here, "../../src/flashattn2/_gluon_forward.py")).read()
start = src.index("    gl.warp_specialize(\n        [\n            (\n                _consumer,")
end = src.index("\n\n\n", start)
old = src[start:end]
indented = "\n".join("    " + line if line else line for line in old.splitlines())
three = '''    if THREE_CONSUMERS:
        # the first Q buffers' 128 rows as two 64-row tiles each (a 128-byte swizzle repeats every 8 rows)
        q_halves = reinterpret(q_first, dtype, [2 * Q_BUFFERS, BLOCK_M, HEAD_DIM], q_last_layout)
        gl.warp_specialize(
            [
                (
                    _consumer,
                    (
                        consumer_args,
                        o_last_desc,
                        q_last,
                        q_bar,
                        q_empty,
                        schedule,
                        CAUSAL,
                        NEGATIVE_SCALE,
                        HEAD_DIM,
                        FIRST_ROWS,
                        THREE_CONSUMERS,
                    ),
                ),
                (
                    _consumer,
                    (
                        consumer_args,
                        o_last_desc,
                        q_halves,
                        q_bar,
                        q_empty,
                        schedule,
                        CAUSAL,
                        NEGATIVE_SCALE,
                        HEAD_DIM,
                        0,
                        THREE_CONSUMERS,
                    ),
                ),
                (
                    _consumer,
                    (
                        consumer_args,
                        o_last_desc,
                        q_halves,
                        q_bar,
                        q_empty,
                        schedule,
                        CAUSAL,
                        NEGATIVE_SCALE,
                        HEAD_DIM,
                        BLOCK_M,
                        THREE_CONSUMERS,
                    ),
                ),
                (_loader, (loader_args, q_bar, q_empty, schedule, CAUSAL, HEAD_DIM)),
            ],
            [4, 4, loader_warps(THREE_CONSUMERS)],
            [WORKER_REGISTERS, WORKER_REGISTERS, loader_registers(HEAD_DIM)],
        )
    else:
''' + indented
src = src[:start] + three + src[end:]
src = src.replace("NUM_WARPS = gl.constexpr(4)", "WORKER_REGISTERS = gl.constexpr(int(os.environ.get(\"THREE4_REGS\", \"144\")))\nNUM_WARPS = gl.constexpr(4)", 1)
src = src.replace("from __future__ import annotations\n", "from __future__ import annotations\n\nimport os\n", 1)
# each 4-warp consumer of the first Q buffer takes its 64 rows of it
old = """            base = _consume_item(
                consumer_args,
                o_desc,
                q_smem.index(buf),"""
assert src.count(old) == 1
src = src.replace(old, """            base = _consume_item(
                consumer_args,
                o_desc,
                _q_buffer(q_smem, buf, ROW_OFFSET, THREE_CONSUMERS),""")
old = "            _release_slot(q_empty, q_empty_at, buf, q_smem.shape[1] // 16, THREE_CONSUMERS)"
assert src.count(old) == 1
src = src.replace(old, "            _release_slot(q_empty, q_empty_at, buf, BLOCK_M // 16, THREE_CONSUMERS)")
old = "@gluon.jit\ndef _consumer("
assert src.count(old) == 1
src = src.replace(old, """@gluon.jit
def _q_buffer(q_smem, buf, ROW_OFFSET: gl.constexpr, THREE_CONSUMERS: gl.constexpr):
    if THREE_CONSUMERS and ROW_OFFSET < item_rows(THREE_CONSUMERS) - BLOCK_M:
        return q_smem.index(2 * buf + ROW_OFFSET // BLOCK_M)
    else:
        return q_smem.index(buf)


""" + old)
old = "from flashattn2._gluon_common import one_of, tma_load"
assert src.count(old) == 1
src = src.replace(old, "from flashattn2._gluon_common import one_of, reinterpret, tma_load")
with open(os.path.join(here, "gf_three4.py"), "w") as f:
    f.write(src)
