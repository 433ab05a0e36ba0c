"""NOTES v104 (python chains_v104.py, beside tail.py of v103): k dQ chains per query tile: key tiles split into k ranges, each range's adds descending (today's order within it),
dealt per pair range by range from the longest items' range, each range descending."""
import sys
sys.path.insert(0, __import__("os").path.dirname(__file__))
import tail
from tail import deal

def simulate(pairs, T, programs, k, add, last=0):
    size = -(-T // k)
    chain = lambda n: n // size
    rng = lambda pr, c: [(pr, n) for n in range(min(T, (c + 1) * size) - 1, c * size - 1, -1)]
    order = []
    for pr in range(pairs - last):
        for c in range(k):
            order += rng(pr, c)
    for c in range(k):  # the last pairs range by range: their long walks before any of their short ones
        for pr in range(pairs - last, pairs):
            order += rng(pr, c)
    cost = lambda it: (T - it[1]) + 1
    lists = deal(order, cost, programs)
    owner = {it: p for p, lst in enumerate(lists) for it in lst}
    free = [0.0] * programs
    bufs = [[0.0, 0.0] for _ in range(programs)]
    added, busy = {}, [0.0] * programs
    for it in order:
        pair, n = it
        p = owner[it]
        t = free[p] + tail.LOAD
        for j in range(n, T):
            b = bufs[p]
            t = max(t, b[0]) + 1.0
            same = n + 1 <= j and chain(n + 1) == chain(n)
            prev = added.get((pair, n + 1, j), 0.0) if same else 0.0
            done = max(t, prev) + add
            added[(pair, n, j)] = done
            bufs[p] = [b[1], done]
        free[p] = t + tail.STORE
        busy[p] += (T - n) + tail.LOAD + tail.STORE
    return max(free) / (sum(busy) / programs)

shapes = [(16, 128, "headline"), (64, 32, "(4,16,4096)"), (128, 16, "(8,16,2048)"), (32, 32, "(2,16,4096)"), (16, 64, "(1,16,8192)")]
for pairs, T, label in shapes:
    print(f"{label:12}", " ".join(f"k={k} last={last}: {simulate(pairs, T, 132, k, 0.3, last):.3f}" for k in (2, 4) for last in (0, 2, 4, 8)), flush=True)
