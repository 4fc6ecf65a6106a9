"""The field validators of a sweep SPEC, shared by its parsers (spec.py, spec_space.py).

Each checks one value and raises `SpecError` naming the field by its TOML path
(``space.config.lr``), what was expected and what arrived; `check_config` and `within` bring the
algorithm config's own checks under the SPEC's field names. They live apart from the parsers so that
spec.py (the SPEC and its ``[train]`` table) and spec_space.py (search space and scheduler) share
one definition of each without importing each other.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

from . import jaxrl

__all__ = ["SpecError", "fail", "int_field", "real_field", "str_field", "table_field", "known_fields",
           "seed_list", "check_config", "within", "config_fields"]


class SpecError(ValueError):
    """A SPEC is invalid; the message names the field (its TOML path)."""


def fail(path: str, expected: str, got: Any) -> None:
    """Raise the `SpecError` ``<path>: expected <expected>, got <value> (<type>)``."""
    raise SpecError(f"{path}: expected {expected}, got {got!r} ({type(got).__name__})")


def int_field(path: str, value: Any, minimum: int = 1) -> int:
    """`value` if it is an integer >= `minimum` (not a bool), else a `SpecError` naming `path`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        fail(path, "a positive integer" if minimum == 1 else f"an integer >= {minimum}", value)
    return value


def real_field(path: str, value: Any) -> float:
    """`value` as a float if it is a finite number (not a bool), else a `SpecError` naming `path`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        fail(path, "a finite number", value)
    return float(value)


def str_field(path: str, value: Any, choices: tuple | None = None) -> str:
    """`value` if it is a string (one of `choices` when given), else a `SpecError` naming `path`."""
    if not isinstance(value, str) or (choices is not None and value not in choices):
        fail(path, f"one of {list(choices)}" if choices else "a string", value)
    return value


def table_field(path: str, value: Any) -> dict:
    """`value` if it is a table (dict), else a `SpecError` naming `path`."""
    if not isinstance(value, dict):
        fail(path, "a table", value)
    return value


def known_fields(path: str, table: dict, keys: set) -> None:
    """Raise a `SpecError` naming the first key of `table` (at `path`) that is not in `keys`."""
    unknown = sorted(set(table) - keys)
    if unknown:
        where = f"{path}.{unknown[0]}" if path else unknown[0]
        raise SpecError(f"{where}: unknown field; valid fields of {path or 'the SPEC'}: "
                        f"{sorted(keys)}")


def seed_list(path: str, value: Any) -> list[int]:
    """A non-empty list of distinct seeds in [0, 2**32) (a single int is one seed), else a `SpecError`."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not value:
        fail(path, "a non-empty list of seeds", value)
    for s in value:
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < 2**32:
            fail(path, "integer seeds in [0, 2**32)", s)
    if len(set(value)) != len(value):
        fail(path, "distinct seeds", value)
    return list(value)


def check_config(path: str, algo: str, fields: dict) -> None:
    """Build the config once to check names, types and ranges; name the SPEC field on error."""
    cls = jaxrl.config_class(algo)
    valid = {f.name for f in dataclasses.fields(cls)} - {"total_steps"}
    for k in fields:
        if k != "total_steps" and k not in valid:
            raise SpecError(f"{path}.{k}: unknown field of {cls.__name__}; valid: "
                            f"{sorted(valid)}")
    try:
        jaxrl.make_config(algo, fields)
    except ValueError as e:
        raise SpecError(within(path, e)) from None


def within(path: str, e: Exception) -> str:
    """``train.config.lr: expected ...`` from the config's ``lr: expected ...``."""
    msg = str(e)
    head, sep, rest = msg.partition(": ")
    if sep and head == "total_steps":
        return f"train.total_steps: {rest}"
    if sep and re.fullmatch(r"\w+", head):
        return f"{path}.{head}: {rest}" if not path.endswith(f".{head}") else f"{path}: {rest}"
    return f"{path}: {msg}"


def config_fields(algo: str) -> dict:
    """The dataclass fields of `algo`'s config class, by name."""
    return {f.name: f for f in dataclasses.fields(jaxrl.config_class(algo))}
