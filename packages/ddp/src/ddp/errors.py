"""The error raised when gradient synchronization is used wrongly or cannot complete."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["GradientSyncError"]

# Error messages list at most this many parameter names; a 48-layer model has
# hundreds, and the first few are enough to locate the problem.
_MAX_NAMES_SHOWN = 8


class GradientSyncError(RuntimeError):
    """Gradient synchronization was called in the wrong order or did not complete.

    Raised, for example, by ``finish_gradient_synchronization()`` when no backward
    pass ran since the last synchronization, when a second backward pass runs
    before the first one was synchronized, or when an all-reduce fails or times
    out because another rank never joined it (the message names the parameters
    whose gradients were still pending).
    """


def describe_names(names: Sequence[str]) -> str:
    """``names`` as a short comma-separated list, elided after a few entries."""
    shown = ", ".join(names[:_MAX_NAMES_SHOWN])
    hidden = len(names) - _MAX_NAMES_SHOWN
    return shown + (f", ... ({hidden} more)" if hidden > 0 else "")


def sync_failed(pending: Sequence[str], cause: BaseException) -> GradientSyncError:
    """The error for an all-reduce that failed with ``cause`` while ``pending`` gradients were unfinished."""
    return GradientSyncError(
        f"gradient all-reduce did not complete ({type(cause).__name__}: {cause}). "
        f"Gradients still pending on this rank: {describe_names(pending)}. "
        "Usually another rank skipped a backward pass or finish_gradient_synchronization(), "
        "or died; a collective that peers never join fails after the process group's timeout "
        "(torch.distributed.init_process_group(timeout=...))."
    )
