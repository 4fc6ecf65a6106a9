"""Boundary checks shared by the public entry points: run in Python, before anything compiles.

Every message names the argument, what was expected and what arrived. ``check_action_shape`` and
``check_action_dict`` run at trace time (shapes and dtypes are static under jit and vmap): the
functional core calls them in every step, so every adapter (gymnax, JaxMARL, Gymnasium,
PettingZoo) goes through the same checks.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

__all__ = ["finite_number", "positive_number", "choice", "instance_of", "finite_array", "real_array",
           "check_action_shape", "check_action_dict", "check_reset_options"]

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


def instance_of(name: str, value: Any, cls: type, expected: str) -> None:
    """A ValueError naming `name` unless `value` is a `cls` (a config or a wrapped environment).

    Args:
        name: the argument or field, first in the message.
        value: what arrived.
        cls: the accepted type.
        expected: how the message names it for the caller, e.g.
            ``"quantgate_env.GateEnv (quantgate_env.make(...))"``.
    """
    if not isinstance(value, cls):
        raise ValueError(f"{name}: expected {expected}, got {type(value).__name__}")


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


def check_reset_options(options: Any, accepted: Sequence[str] = ()) -> None:
    """``reset(options=...)`` of the Gymnasium adapters: None or a dict of known keys.

    The environments take no reset options today (``accepted`` is empty), so only None and ``{}``
    (what Gymnasium's ``check_env`` passes) are accepted; silently ignoring ``{"bogus": 1}`` would hide
    a caller's belief that the option did something.

    Raises:
        ValueError: naming ``options``, what is accepted and what arrived.
    """
    if options is None:
        return
    known = f"the keys {sorted(accepted)}" if accepted else "no keys (this environment takes no reset options)"
    if not isinstance(options, Mapping):
        raise ValueError(f"options: expected None or a dict with {known}, got {_describe(options)}")
    unknown = sorted(str(k) for k in options if k not in accepted)
    if unknown:
        raise ValueError(f"options: expected None or a dict with {known}, got unknown key(s) {unknown}")


def check_action_shape(name: str, action: Any, shape: tuple[int, ...], integer: bool) -> None:
    """Trace-time check of one action's shape and kind (shapes are static under jit and vmap).

    Args:
        name: how the message names the action, e.g. ``"action"`` or ``"actions['q0']"``.
        action: the (possibly traced) action; under vmap, one environment's action.
        shape: the expected shape.
        integer: True for discrete level indices (an integer or boolean dtype is required).

    Raises:
        ValueError: naming ``name``, the expected shape and the shape that arrived.
    """
    try:
        got_shape, dtype = tuple(jnp.shape(action)), jnp.result_type(action)
    except TypeError:
        raise ValueError(f"{name}: expected an array of shape {shape}, got {type(action).__name__}") from None
    if got_shape != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {got_shape}")
    if integer and not (jnp.issubdtype(dtype, jnp.integer) or dtype == np.bool_):
        raise ValueError(f"{name}: expected integer level indices, got dtype {dtype}")
    if not integer and not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)):
        raise ValueError(f"{name}: expected real numbers, got dtype {dtype}")


def check_action_dict(actions: Any, agents: tuple[str, ...], shape: tuple[int, ...] | None, integer: bool) -> None:
    """Trace-time check of an agent-keyed action dict: exactly one action per agent.

    Each action must have ``shape`` (``None``: the caller checks the shapes).
    """
    if not isinstance(actions, Mapping):
        raise ValueError(f"actions: expected a dict {{agent: action}} for agents {agents}, got {type(actions).__name__}")
    missing = [a for a in agents if a not in actions]
    unknown = [a for a in actions if a not in agents]
    if missing or unknown:
        raise ValueError(
            f"actions: expected one action per agent of {agents}, got keys {tuple(actions)}"
            + (f" (missing {missing})" if missing else "") + (f" (unknown {unknown})" if unknown else "")
        )
    if shape is not None:
        for agent in agents:
            check_action_shape(f"actions[{agent!r}]", actions[agent], shape, integer)
