"""gb_chains.dealing_order and causal_backward_schedule on the CPU: every item once, each chain predecessor
dealt first, each program's list in dealing order; CHAINS = 1 equals the package's table."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gb_chains

import flashattn2._gluon_backward as package

CASES = [  # items, key tiles, query tiles, ratio, programs, chains, last pairs
    (16 * 128, 128, 128, 1, 132, 4, 4),
    (64 * 32, 32, 32, 1, 132, 2, 8),
    (3 * 4 * 36, 36, 36, 1, 132, 4, 4),
    (2048, 128, 128, 1, 132, 1, 0),
]
for items, kt, qt, ratio, programs, chains, last in CASES:
    ct = -(-kt // chains)
    order = gb_chains.dealing_order(items, kt, ct, last)
    assert sorted(order) == list(range(items))
    position = {item: p for p, item in enumerate(order)}
    for item in range(items):
        pair, n = item // kt, kt - 1 - item % kt
        if n + 1 < kt and (n + 1) // ct == n // ct:
            assert position[pair * kt + kt - 2 - n] < position[item]
    table = gb_chains.causal_backward_schedule(items, kt, qt, ratio, programs, ct, last)
    offsets = table[: programs + 1]
    lists = [table[offsets[p] : offsets[p + 1]] for p in range(programs)]
    assert sorted(x for taken in lists for x in taken) == list(range(items))
    for taken in lists:
        assert [position[x] for x in taken] == sorted(position[x] for x in taken)
    if chains == 1:
        assert table == package.causal_backward_schedule(items, kt, qt, ratio, programs)
    print("ok", items, kt, chains, last)
