"""Model of the persistent causal Hopper backward at head dim 64 (RATIO 1): items are (pair, key tile n), walking
query tiles n..T-1, one time unit per step, plus LOAD before and STORE after. Each step's dQ add to tile j waits for
the previous add to j in that tile's fixed order (descending: key tile j first, then j-1, ..., 0; ascending: 0 first,
then 1, ..., j). Two dQ buffers: a step's hand-off waits for the add of two steps before. A program runs its dealt
list in order; its writers' last adds overlap its next item."""
import heapq, itertools, sys
from collections import defaultdict

LOAD, STORE, ADD = 0.5, 0.5, 0.05


def deal(order, cost, programs):
    loads = [(0, p) for p in range(programs)]
    lists = [[] for _ in range(programs)]
    for item in order:
        load, p = heapq.heappop(loads)
        lists[p].append(item)
        heapq.heappush(loads, (load + cost(item), p))
    return lists


def simulate(pairs, T, programs, ascending, order, top_down=False):
    cost = lambda it: (T - it[1]) + 1
    lists = deal(order, cost, programs)
    rank = {it: r for r, it in enumerate(order)}
    # process items in dealing order: each item's dependencies (same pair, previous in chain) come earlier
    owner = {}
    for p, lst in enumerate(lists):
        for it in lst:
            owner[it] = p
    free = [0.0] * programs            # when each program's consumers are free
    bufs = [[0.0, 0.0] for _ in range(programs)]  # add-done times of the program's last two hand-offs
    added = {}                          # (pair, n, j) -> add done
    busy = [0.0] * programs
    active = []                          # (start, end, pair)
    for it in order:
        pair, n = it
        p = owner[it]
        t = free[p] + LOAD
        start = free[p]
        for j in (range(T - 1, n - 1, -1) if top_down else range(n, T)):
            b = bufs[p]
            t = max(t, b[0]) + 1.0       # compute the step once the buffer of two steps ago is free
            if ascending:
                prev = added.get((pair, n - 1, j), 0.0) if n > 0 else 0.0
            else:
                prev = added.get((pair, n + 1, j), 0.0) if n < j else 0.0
            done = max(t, prev) + ADD
            added[(pair, n, j)] = done
            bufs[p] = [b[1], done]
        free[p] = t + STORE
        busy[p] += (T - n) + LOAD + STORE
        active.append((start, free[p], pair))
    makespan = max(free)
    mean = sum(busy) / programs
    return makespan / mean, makespan, mean, active


def orders(pairs, T, ascending, group):
    keys = range(T) if ascending else range(T - 1, -1, -1)
    out = []
    for g0 in range(0, pairs, group):
        grp = range(g0, min(g0 + group, pairs))
        for n in keys:
            for pr in grp:
                out.append((pr, n))
    return out


def pairs_in_flight(active, makespan, samples=200):
    vals = []
    for s in range(samples):
        t = makespan * (s + 0.5) / samples
        vals.append(len({pr for a, b, pr in active if a <= t < b}))
    vals.sort()
    return vals[len(vals) // 2], vals[-1]


if __name__ == "__main__":
    shapes = [(16, 128, "headline (1,16,16384)"), (64, 32, "(4,16,4096)"), (128, 16, "(8,16,2048)"),
              (32, 32, "(2,16,4096)"), (16, 64, "(1,16,8192)")]
    for pairs, T, label in shapes:
        row = [label]
        for asc, group, top in [(False, 1, False), (True, 1, True), (True, 2, True), (False, 1, True)]:
            ratio, mk, mean, active = simulate(pairs, T, 132, asc, orders(pairs, T, asc, group), top)
            med, mx = pairs_in_flight(active, mk)
            row.append(f"{'asc' if asc else 'desc'}{' top-down' if top else ''} G={group}: {ratio:.3f} (pairs {med}/{mx})")
        print(" | ".join(row), flush=True)
