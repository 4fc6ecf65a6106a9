"""Naming code by ``"module:factory"`` (the convention of ``uvicorn app:main``).

The CLI names environments (``--env``) and networks (``--network``) this way; one resolver gives
both the same rules and the same messages.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["import_factory"]


def import_factory(spec: Any, argument: str, example: str) -> Callable:
    """Import the callable named ``"module:factory"`` (dots after the colon reach attributes).

    Args:
        spec: the name, e.g. ``"quantgate_env:make"``.
        argument: what the user set (``"env"``, ``"network"``), the start of every message.
        example: a well-formed spec shown when `spec` is malformed.

    Returns:
        The callable.

    Raises:
        ValueError: malformed spec, a module that cannot be imported, or a missing or
            non-callable factory; the message starts with `argument`.
    """
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise ValueError(f"{argument}: expected 'module:factory' (e.g. {example!r}), got {spec!r}")
    module_name, attr = spec.split(":")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"{argument}: cannot import module {module_name!r} of {spec!r} ({e}); is "
                         f"it installed and on the Python path?") from e
    for part in attr.split("."):
        obj = getattr(obj, part, None)
    if obj is None or not callable(obj):
        raise ValueError(f"{argument}: module {module_name!r} has no callable {attr!r} "
                         f"(from {spec!r})")
    return obj
