"""argparse ``type=`` converters for numeric options and output folders, with messages that say what is expected.

Example::

    import argparse
    from benchkit.argtypes import positive_int

    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=positive_int, default=10)
    parser.parse_args(["--steps", "0"])  # exits: "argument --steps: must be an integer >= 1, got 0"
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from pathlib import Path

__all__ = ["finite_float", "non_negative_int", "output_folder", "positive_float", "positive_int"]


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text}")
    return value


def finite_float(text: str) -> float:
    """Any number but NaN and plus or minus infinity (``1e400`` is infinity as a float)."""
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text}")
    return value


def output_folder(text: str) -> Path:
    """A folder that exists or can be created, checked before any work is done.

    The deepest part of the path that exists (the path itself, or a parent) must
    be a folder in which a folder can be created. That is tried: a temporary
    folder is made there and removed, so that a read-only or virtual file system
    (``/proc``) or a missing permission fails here, not when the results are
    written. Nothing is left behind; the folder itself is created by whoever
    writes into it.
    """
    path = Path(text)
    existing = next(p for p in (path, *path.parents) if os.path.lexists(p))  # "." or "/" always exists
    if not existing.is_dir():
        what = "exists and is not a folder" if existing == path else f"cannot be created: {existing} is not a folder"
        raise argparse.ArgumentTypeError(f"{text} {what}")
    try:
        os.rmdir(tempfile.mkdtemp(dir=existing))
    except OSError as error:
        raise argparse.ArgumentTypeError(f"{text}: cannot create a folder in {existing} ({error.strerror})") from error
    return path
