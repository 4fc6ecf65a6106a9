"""Checks of the trainer's arguments, run in Python before a run directory exists or anything compiles.

Each raises ValueError naming the argument, what was expected and what arrived.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["PROGRESS_CHOICES", "check_seeds", "check_pos_int", "check_tag", "check_env_options",
           "check_progress", "check_argv", "check_stop_after", "check_time_budget"]

PROGRESS_CHOICES = (None, "bar", "lines", "off")


def check_seeds(seeds) -> tuple[int, ...]:
    """One int or a sequence of distinct ints in [0, 2**32), as a tuple."""
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        seeds = (int(seeds),)
    try:
        seeds = tuple(seeds)
    except TypeError as e:
        raise ValueError(f"seeds: expected an int or a sequence of ints, got {seeds!r}") from e
    if not seeds:
        raise ValueError("seeds: expected at least one seed, got none")
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 0 <= s < 2**32:
            raise ValueError(f"seeds: expected integers in [0, 2**32), got {s!r}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds: expected distinct seeds, got {list(seeds)}")
    return tuple(int(s) for s in seeds)


def check_pos_int(name: str, value) -> int:
    """`value` as a positive int (numpy integers accepted; bools refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    return int(value)


def check_tag(tag: str) -> str:
    """A run-name suffix without path separators."""
    if not isinstance(tag, str) or any(c in tag for c in "/\\") or tag in (".", ".."):
        raise ValueError(f"tag: expected a name without path separators, got {tag!r}")
    return tag


def check_env_options(options) -> dict:
    """Keyword options of an env factory (None: none)."""
    if options is None:
        return {}
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        raise ValueError(f"env_options: expected a dict of keyword options with string keys, got "
                         f"{options!r}")
    return dict(options)


def check_progress(progress) -> str | None:
    """One of `PROGRESS_CHOICES`."""
    if progress not in PROGRESS_CHOICES or isinstance(progress, bool):
        raise ValueError(f"progress: expected one of {list(PROGRESS_CHOICES)}, got {progress!r}")
    return progress


def check_argv(argv) -> list[str] | None:
    """The command line to record: a list of strings, or None."""
    if argv is None:
        return None
    if isinstance(argv, (str, bytes)) or not isinstance(argv, Sequence) \
            or not all(isinstance(a, str) for a in argv):
        raise ValueError(f"argv: expected a list of strings (the command line) or None, got "
                         f"{argv!r}")
    return list(argv)


def check_stop_after(stop_after) -> int | None:
    """None, or a positive number of updates."""
    return None if stop_after is None else check_pos_int("stop_after", stop_after)


def check_time_budget(seconds) -> float | None:
    """None, or a positive finite number of seconds."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float, np.integer, np.floating)) \
            or not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"time_budget: expected a positive finite number of seconds, got "
                         f"{seconds!r}")
    return float(seconds)
