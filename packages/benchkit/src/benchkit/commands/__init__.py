"""Subcommands of ``benchkit``: one module each (see :mod:`benchkit.cli`)."""
