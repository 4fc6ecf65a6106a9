"""Boundary checks shared by the public entry points: run in Python, before anything compiles.

Every message names the argument, what was expected and what arrived.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["finite_number", "positive_number", "choice", "finite_array", "real_array"]

# numpy dtype kinds that are real numbers: signed, unsigned, floating (not bool, complex, str, object)
_REAL_KINDS = "iuf"


def _describe(value: Any) -> str:
    """``value`` for an error message: its type and its repr (shortened)."""
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 80 else text[:77] + '...'}"


def finite_number(name: str, value: Any) -> float:
    """``value`` as a float, or a ValueError if it is not a finite real number.

    Strings ("50"), bools and complex numbers are refused rather than coerced: ``float("50")`` and
    ``float(True)`` would succeed and hide a caller's mistake. Python and numpy ints and floats and
    0-d real arrays are accepted.
    """
    real = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
    if not real and not isinstance(value, (str, bytes, bool, np.bool_)):
        try:
            array = np.asarray(value)
            real = array.ndim == 0 and array.dtype.kind in _REAL_KINDS
        except Exception:  # anything numpy cannot hold is not a number either
            real = False
    if not real:
        raise ValueError(f"{name}: expected a finite real number (int or float), got {_describe(value)}")
    number = float(value)
    if not math.isfinite(number):
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


def real_array(name: str, value: Any) -> np.ndarray:
    """``value`` as a float64 numpy array, or a ValueError if its entries are not real numbers.

    Ints and floats of any width are accepted; bools, complex numbers, strings and other objects
    are refused (``np.asarray(x, dtype=float)`` would turn "0.5" into 0.5, True into 1.0 and drop
    an imaginary part with only a warning).
    """
    try:
        raw = np.asarray(value)
    except Exception:
        raise ValueError(f"{name}: expected an array of real numbers (int or float), got {type(value).__name__}") from None
    if raw.dtype.kind not in _REAL_KINDS:
        raise ValueError(
            f"{name}: expected an array of real numbers (int or float), got dtype {raw.dtype} ({_describe(value)})"
        )
    return raw.astype(np.float64)


def finite_array(name: str, value: Any, *, ndim: int | None = None, shape: tuple | None = None) -> np.ndarray:
    """``value`` as a float64 numpy array with the given rank/shape and only finite entries."""
    array = real_array(name, value)
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
