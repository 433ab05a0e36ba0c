"""Launching all-reduces during backward, in the same order on every rank.

Collectives are matched by the order in which ranks issue them: the k-th
all-reduce of one rank meets the k-th all-reduce of every other rank. Gradients,
however, may become ready in a different order on different ranks (a branch
taken on one rank only, a different autograd schedule). Issuing each all-reduce
the moment its gradients are ready could therefore pair tensors of different
parameters and silently average the wrong numbers, or hang on a size mismatch.

:class:`InOrderLauncher` prevents this: gradients are grouped into *units* (a
single parameter for :class:`ddp.OverlapDDP`, a bucket for
:class:`ddp.BucketedDDP`) numbered in the order they are expected to become ready,
and unit ``k`` is launched only when all its gradients are ready *and* units
``0 .. k-1`` have been launched. Units not launched when backward ends (a
parameter got no gradient on this rank) are launched, still in order, by
:meth:`InOrderLauncher.finish`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch.distributed as dist

from ddp.errors import GradientSyncError, sync_failed

__all__ = ["InOrderLauncher"]


class InOrderLauncher:
    """Launches units of parameters strictly in unit order, each once all its gradients are ready.

    Arguments:
        units: ``units[k]`` lists the indices of the parameters in unit ``k``;
            every parameter index appears in exactly one unit.
        names: ``names[i]`` is parameter ``i``'s name (for error messages).
        launch: ``launch(k)`` starts unit ``k``'s asynchronous all-reduce and
            returns its ``torch.distributed.Work``.
        complete: ``complete(k)`` runs after unit ``k``'s all-reduce finished
            (averages and writes back the gradients); ``None`` when nothing is
            left to do then (the all-reduce averaged in place).
    """

    def __init__(
        self,
        units: Sequence[Sequence[int]],
        names: Sequence[str],
        launch: Callable[[int], dist.Work],
        complete: Callable[[int], None] | None,
    ) -> None:
        self.units = [list(u) for u in units]
        self._names = list(names)
        self._launch = launch
        self._complete = complete
        self._unit_of = {i: k for k, unit in enumerate(self.units) for i in unit}
        if sorted(self._unit_of) != list(range(len(self._names))) or sum(map(len, self.units)) != len(self._names):
            raise ValueError(f"units must partition the parameter indices 0..{len(self._names) - 1}, got {self.units}")
        self._reset()

    def _reset(self) -> None:
        self._ready = [False] * len(self._names)
        self._missing = [len(unit) for unit in self.units]
        self._next = 0  # the lowest unit index not launched yet
        self._in_flight: list[tuple[int, dist.Work]] = []

    def is_ready(self, index: int) -> bool:
        """Whether parameter ``index``'s gradient is complete in this step (and may be in an all-reduce).

        Check it before backward adds into that gradient: adding into a gradient
        that is being all-reduced would corrupt the average on this rank only.
        """
        return self._ready[index]

    def mark_ready(self, index: int) -> None:
        """Record that parameter ``index``'s gradient is complete; launch every unit now due."""
        if self._ready[index]:
            raise GradientSyncError(f"{self._names[index]}'s gradient was reported complete twice in one step")
        self._ready[index] = True
        self._missing[self._unit_of[index]] -= 1
        while self._next < len(self.units) and self._missing[self._next] == 0:
            self._launch_next()

    def _launch_next(self) -> None:
        work = self._launch(self._next)
        self._in_flight.append((self._next, work))
        self._next += 1

    def finish(self) -> None:
        """Launch the remaining units in order, wait for all, complete each; then start a new step.

        Raises:
            GradientSyncError: an all-reduce failed or timed out; the message
                names the gradients not yet averaged.
        """
        self._drain(complete=True)

    def abandon(self) -> None:
        """Launch the remaining units in order and wait for all, completing none; then start a new step.

        Every rank that abandons a step thus issues all of its all-reduces, however
        far its backward got, so the next step's all-reduces pair up again; their
        results are discarded.

        Raises:
            GradientSyncError: an all-reduce failed or timed out.
        """
        self._drain(complete=False)

    def _drain(self, complete: bool) -> None:
        completed = 0
        complete_unit = self._complete if complete else None
        try:
            while self._next < len(self.units):
                self._launch_next()
            for unit, work in self._in_flight:
                work.wait()
                if complete_unit is not None:
                    complete_unit(unit)
                completed += 1
        except GradientSyncError:
            raise
        except RuntimeError as error:
            unfinished = [k for k, _ in self._in_flight[completed:]] + list(range(self._next, len(self.units)))
            raise sync_failed([self._names[i] for k in unfinished for i in self.units[k]], error) from error
        finally:
            self._reset()
