"""Boundary checks shared by the public entry points: run in Python, before anything compiles.

Every message names the argument, what was expected and what arrived.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["finite_number", "positive_number", "choice", "finite_array"]


def finite_number(name: str, value: Any) -> float:
    """``value`` as a float, or a ValueError if it is not a finite real number."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a finite number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(number):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return number


def positive_number(name: str, value: Any) -> float:
    """``value`` as a float, or a ValueError if it is not finite and > 0."""
    number = finite_number(name, value)
    if number <= 0:
        raise ValueError(f"{name}: expected a positive number, got {value!r}")
    return number


def choice(name: str, value: Any, options: Sequence[str]) -> str:
    """``value`` if it is one of ``options``, else a ValueError listing them."""
    if value not in options:
        raise ValueError(f"{name}: expected one of {tuple(options)}, got {value!r}")
    return value


def finite_array(name: str, value: Any, *, ndim: int | None = None, shape: tuple | None = None) -> np.ndarray:
    """``value`` as a float64 numpy array with the given rank/shape and only finite entries."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected an array of real numbers, got {type(value).__name__}") from None
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D array, got shape {array.shape}")
    if shape is not None and array.shape != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {array.shape}")
    bad = ~np.isfinite(array)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{name}: expected finite values, got {array[first]} at index {first if len(first) > 1 else first[0]}"
        )
    return array
