"""Which rank owns which parameter: a deterministic, balanced partition by element count.

The algorithm is greedy "largest first onto the least-loaded rank" (the LPT rule
for multiprocessor scheduling, Graham 1969): parameters are visited from the
largest to the smallest (equal sizes in their given order), and each goes to the
rank whose load (elements owned so far) is smallest, the lowest rank on a tie. It
uses only sizes and positions, so every rank computes the same answer.

Balance bound: when a parameter is placed, the least-loaded rank holds at most the
average, so no rank ever ends above ``total / world_size + largest`` elements,
where ``largest`` is the largest single parameter. This also holds when
parameters arrive in several batches (``initial_loads``), which is how
parameter groups added later are placed.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["partition_parameters"]


def partition_parameters(
    sizes: Sequence[int],
    world_size: int,
    initial_loads: Sequence[int] | None = None,
) -> list[int]:
    """Assign each parameter to a rank; returns the owner rank of every entry of ``sizes``.

    Arguments:
        sizes: number of elements of each parameter (``tensor.numel()``), >= 0.
        world_size: number of ranks, >= 1.
        initial_loads: elements each rank already owns (length ``world_size``);
            defaults to all zeros.

    Returns:
        ``owners`` with ``owners[i]`` in ``range(world_size)``, the rank that owns
        parameter ``i``.

    Example::

        >>> partition_parameters([10, 40, 30, 20], world_size=2)
        [0, 0, 1, 1]
    """
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    sizes = list(sizes)
    if any(not isinstance(n, int) or n < 0 for n in sizes):
        raise ValueError(f"sizes must be ints >= 0 (element counts), got {sizes}")
    loads = [0] * world_size if initial_loads is None else list(initial_loads)
    if len(loads) != world_size:
        raise ValueError(f"initial_loads must have one entry per rank (world_size={world_size}), got {len(loads)}")

    owners = [0] * len(sizes)
    for index in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        rank = min(range(world_size), key=lambda r: (loads[r], r))
        owners[index] = rank
        loads[rank] += sizes[index]
    return owners
