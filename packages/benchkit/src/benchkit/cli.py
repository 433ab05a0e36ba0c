"""The ``benchkit`` command line: one subcommand per question.

Every module in :mod:`benchkit.commands` is a subcommand. A command module defines

- ``HELP``: one line shown in ``benchkit --help``;
- ``EXAMPLES``: worked examples shown at the end of ``benchkit <name> --help``;
- ``add_arguments(parser)``: its argparse options;
- ``run(args) -> int``: does the work and returns the exit code.

The subcommand's name is the module's name (``run_`` style suffixes are not used).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from types import ModuleType

import benchkit.commands
from benchkit.__about__ import __version__
from benchkit.errors import BenchkitError
from benchkit.options import earlier_results_note

EPILOG = """examples:
  benchkit run                                  # the end-to-end tour on this machine
  benchkit model --size small --mode train-step # phase timings of one model
  benchkit attention --help                     # every subcommand has worked examples
"""


def _command_modules() -> dict[str, ModuleType]:
    names = sorted(m.name for m in pkgutil.iter_modules(benchkit.commands.__path__))
    return {name: importlib.import_module(f"benchkit.commands.{name}") for name in names}


def build_parser() -> argparse.ArgumentParser:
    """The ``benchkit`` parser, with one subparser per command module."""
    parser = argparse.ArgumentParser(
        prog="benchkit",
        description="Where do time and memory go in transformer training? One subcommand per question.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"benchkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    for name, module in _command_modules().items():
        cmd = sub.add_parser(
            name,
            help=module.HELP,
            description=module.HELP,
            epilog="examples:\n" + module.EXAMPLES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run, _parser=cmd)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the subcommand named in ``argv`` (default ``sys.argv[1:]``); return its exit code.

    Arguments the subcommand does not know are its error, with its usage
    (``benchkit run: error: unrecognized arguments: ...``), exit code 2. When
    ``--out`` already holds files, a note on stderr says that this run replaces
    those it writes again (rank 0 only, under a launcher). A
    :class:`~benchkit.errors.BenchkitError` becomes one line on stderr,
    ``benchkit <command>: error: <message>``, and exit code 2.
    """
    args, unknown = build_parser().parse_known_args(sys.argv[1:] if argv is None else argv)
    if unknown:
        args._parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    note = earlier_results_note(args.out) if getattr(args, "out", None) is not None else None
    if note and os.environ.get("RANK", "0") == "0":  # under torchrun every rank runs this
        print(f"benchkit {args.command}: note: {note}", file=sys.stderr)
    try:
        return args._run(args)
    except BenchkitError as error:
        print(f"benchkit {args.command}: error: {error}", file=sys.stderr)
        return 2
