"""Option types of the ``sgemm-cube`` commands: values checked as argparse parses them.

Shared by :mod:`sgemm_cube.cli` and :mod:`sgemm_cube.tuning.cli` (the ``tune`` command), so it lives
beside both rather than in either: the command line imports the tuner's parser, and a tuner that
imported from ``sgemm_cube.cli`` would close a loop between the two packages
(``tests/call_graph.py``, :func:`package_cycles`).

A value a command cannot use (a size of 0, a negative count, an
exponent range whose first value exceeds its last, a file that does not
exist) makes argparse print the usage and one line naming the option,
and exit with status 2, before anything runs.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

__all__ = ["positive_int", "nonnegative_int", "int_in", "positive_float", "float_at_least", "existing_path",
           "output_folder", "output_file", "OrderedPair"]


def _number(text: str, kind):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None


def positive_int(text: str) -> int:
    """An integer >= 1 (a size, a count of repetitions or trials)."""
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def nonnegative_int(text: str) -> int:
    """An integer >= 0 (a count that may be zero, e.g. warm-up runs)."""
    value = _number(text, int)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {value}")
    return value


def int_in(lo: int, hi: int, why: str = ""):
    """Type of an integer in ``[lo, hi]``; ``why`` ends the message of a value outside it."""

    def parse(text: str) -> int:
        value = _number(text, int)
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be an integer in [{lo}, {hi}]{why}, got {value}")
        return value

    parse.__name__ = f"integer in [{lo}, {hi}]"
    return parse


def positive_float(text: str) -> float:
    """A finite number > 0 (a time budget, a margin)."""
    value = _number(text, float)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def float_at_least(lo: float):
    """Type of a finite number >= ``lo``."""

    def parse(text: str) -> float:
        value = _number(text, float)
        if not (math.isfinite(value) and value >= lo):
            raise argparse.ArgumentTypeError(f"must be a finite number >= {lo:g}, got {text}")
        return value

    parse.__name__ = f"number >= {lo:g}"
    return parse


def existing_path(text: str) -> Path:
    """A file or folder that exists."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"no such file or folder: {text}")
    return path


def output_folder(text: str) -> str:
    """A folder to write into: one that exists, or can be created (no file in its way)."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise argparse.ArgumentTypeError(f"cannot create the folder {text}: {parent} is a file")
            break
    return text


def output_file(text: str) -> str:
    """A file to write: its folder must exist, and the path must not be a folder."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; name a file in it")
    folder = path.parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"no such folder: {folder} (create it first)" if not folder.exists()
                                         else f"{folder} is a file, not a folder")
    return text


class OrderedPair(argparse.Action):
    """``nargs=2`` action that refuses a first value greater than the second (``LO HI`` ranges)."""

    def __call__(self, parser, namespace, values, option_string=None):
        lo, hi = values
        if lo > hi:
            raise argparse.ArgumentError(self, f"the first value ({lo:g}) must not exceed the second ({hi:g})")
        setattr(namespace, self.dest, list(values))
