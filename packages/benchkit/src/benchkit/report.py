"""Output conventions shared by every subcommand: environment, files, tables, progress.

Each subcommand prints a readable table (:func:`format_table`), writes its rows
as JSON with the environment recorded, and CSV on request (:func:`write_results`),
into ``--out`` (:func:`benchkit.options.add_output_arguments`). Long sweeps wrap
their loop in :func:`progress`.

Example::

    import tempfile
    from benchkit.report import format_table, write_results

    rows = [{"size": "tiny", "forward_ms": 1.234}, {"size": "small", "forward_ms": 20.5}]
    print(format_table(rows))
    path = write_results(tempfile.mkdtemp(), "model", rows, csv=True)  # .../model.json (+ model.csv)
"""

from __future__ import annotations

import argparse
import csv as csv_module
import dataclasses
import datetime
import functools
import importlib.metadata
import json
import math
import multiprocessing
import os
import platform
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy
import torch

from benchkit.devices import device_name

__all__ = [
    "environment",
    "format_table",
    "options_for_json",
    "progress",
    "write_results",
]

T = TypeVar("T")


def _package_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache  # one subprocess per process: partial results are written after every cell
def _git_revision() -> str | None:
    """``git describe`` of the checkout this file lives in (``-dirty`` if modified), if any."""
    try:
        done = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


# What sys.argv[0] is under ``python -m benchkit``: the path of this package's __main__.py.
_MAIN_FILE = Path(__file__).resolve().with_name("__main__.py")


def _script_as_typed(path: str) -> str:
    """A console script's path (``sys.argv[0]``) as the user would type it: its bare name where
    that name on ``PATH`` is this very file (an activated venv, ``hatch run``), else the path."""
    name = os.path.basename(path)
    found = shutil.which(name)
    return name if found and os.path.samefile(found, path) else path


def _command_line() -> list[str]:
    """The command that started this program, as typed where the process can tell.

    ``sys.argv``, with the console script ``benchkit`` shown as
    :func:`_script_as_typed` makes it (its interpreter is only told the script's
    path, not the name typed). Under ``python -m benchkit``, where ``sys.argv[0]``
    is the path of ``benchkit/__main__.py``: the interpreter's own command line
    (``sys.orig_argv``: ``python -m benchkit ...`` with the interpreter's options).
    A process spawned by such a run through :mod:`multiprocessing` inherits its
    ``sys.argv`` but has multiprocessing's command line: it records
    ``<sys.executable> -m benchkit ...``.
    """
    if Path(sys.argv[0]).resolve() != _MAIN_FILE:
        return [_script_as_typed(sys.argv[0]), *sys.argv[1:]] if os.path.isfile(sys.argv[0]) else sys.argv
    if multiprocessing.parent_process() is None:
        return sys.orig_argv
    return [sys.executable, "-m", "benchkit", *sys.argv[1:]]


def environment() -> dict[str, Any]:
    """Where and how a measurement was taken: device, software versions, git
    revision (None outside a checkout), command line, UTC date and hostname."""
    return {
        "device": device_name(),
        "torch": torch.__version__,
        "triton": _package_version("triton"),
        "cuda": torch.version.cuda,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "git_revision": _git_revision(),
        "command": shlex.join(_command_line()),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
    }


def options_for_json(args: argparse.Namespace) -> dict[str, Any]:
    """The parsed options of a subcommand, for ``write_results(meta=...)``
    (argparse's private entries such as the handler are left out)."""
    return {k: v for k, v in vars(args).items() if not k.startswith("_")}


def _to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    if isinstance(value, numpy.generic):
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} to JSON: {value!r}")


def _finite_or_none(value: Any) -> Any:
    """JSON has no NaN or infinity: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(v) for v in value]
    return value


def write_results(
    out_dir: str | Path,
    name: str,
    rows: Sequence[Mapping[str, Any]],
    *,
    meta: Mapping[str, Any] | None = None,
    csv: bool = False,
) -> Path:
    """Write ``rows`` to ``out_dir/name.json`` and, if ``csv``, ``out_dir/name.csv``.

    The JSON object is ``{"environment": environment(), "meta": meta or {},
    "rows": rows}``; dataclasses (e.g. :class:`benchkit.timing.Stats`) become
    objects, paths/dtypes/devices strings, NaN and infinity null. The CSV has one
    column per key seen in any row (first-seen order); nested values are written
    as JSON text. Creates ``out_dir`` if needed; returns the JSON file's path.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [dict(row) for row in rows]
    document = {"environment": environment(), "meta": dict(meta or {}), "rows": rows}
    # Round-trip through json once so that dataclasses etc. are converted before
    # NaN/inf are replaced.
    document = _finite_or_none(json.loads(json.dumps(document, default=_to_jsonable)))
    json_path = out_dir / f"{name}.json"
    json_path.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n")
    if csv:
        columns = _columns(document["rows"])
        with open(out_dir / f"{name}.csv", "w", newline="") as handle:
            writer = csv_module.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            for row in document["rows"]:
                writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in row.items()})
    return json_path


def _columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    return list(columns)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"  # four significant digits: more than timings' run-to-run spread
    return str(value)


def format_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """A fixed-width text table of ``rows``: a header, a rule, one line per row.

    ``columns`` picks and orders the columns (default: every key, first-seen
    order). Numbers are right-aligned, floats shown with 4 significant digits,
    missing values and None as ``-``.
    """
    columns = list(columns) if columns is not None else _columns(rows)
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(line[i]) for line in cells]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(row.get(c), (int, float)) or row.get(c) is None for row in rows) for c in columns]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)]
        return "  ".join(parts).rstrip()

    return "\n".join([line(columns), line(["-" * w for w in widths])] + [line(c) for c in cells])


def progress(iterable: Iterable[T], desc: str, total: int | None = None) -> Iterator[T]:
    """Yield from ``iterable`` while reporting ``desc: i/total`` and elapsed seconds
    on stderr: one line rewritten in place on a terminal, one line per item otherwise."""
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    interactive = sys.stderr.isatty()
    start = time.monotonic()
    count = 0
    of_total = f"/{total}" if total is not None else ""
    for item in iterable:
        yield item
        count += 1
        message = f"{desc}: {count}{of_total} ({time.monotonic() - start:.1f} s)"
        sys.stderr.write(f"\r{message}" if interactive else f"{message}\n")
        sys.stderr.flush()
    if interactive and count:
        sys.stderr.write("\n")
        sys.stderr.flush()
