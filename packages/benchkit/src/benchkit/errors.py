"""The one exception type a subcommand raises for a request it cannot serve.

:func:`benchkit.cli.main` catches :class:`BenchkitError`, prints
``benchkit <command>: error: <message>`` on stderr and exits with status 2 (the
status argparse uses for bad arguments), without a traceback. Use it for
problems of the request or the machine, such as a GPU-only measurement asked
for on a CPU machine; let programming errors raise as usual.

Example::

    from benchkit.errors import BenchkitError

    raise BenchkitError("--device cuda was requested but no CUDA GPU is visible")
"""

__all__ = ["BenchkitError"]


class BenchkitError(Exception):
    """A benchkit request that cannot be served here; the message says why and what to do."""
