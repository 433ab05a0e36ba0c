"""argparse ``type=`` converters for numeric options, with messages that say what is expected.

Example::

    import argparse
    from benchkit.argtypes import positive_int

    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=positive_int, default=10)
    parser.parse_args(["--steps", "0"])   # exits: "argument --steps: must be an integer >= 1, got 0"
"""

from __future__ import annotations

import argparse
import math

__all__ = ["non_negative_int", "positive_float", "positive_int"]


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


def positive_float(text: str) -> float:
    """A finite number > 0."""
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text}")
    return value
