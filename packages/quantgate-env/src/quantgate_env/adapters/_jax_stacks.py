"""Pieces of the gymnax and JaxMARL adapters (``quantgate_env.gymnax``, ``quantgate_env.jaxmarl``).

Neither gymnax nor JaxMARL is imported here, so the pieces are testable with the base install.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ..validation import instance_of

__all__ = ["check_params", "select_where"]


def select_where(done: jax.Array, new: Any, old: Any) -> Any:
    """Leafwise ``new if done else old`` for a () bool ``done`` (pytrees of the same structure)."""
    return jax.tree.map(lambda a, b: jnp.where(done, a, b), new, old)


def check_params(params: Any, expected: type, what: str, home: str) -> None:
    """Raise a ValueError unless ``params`` is an instance of ``expected`` (checked before tracing).

    Args:
        params: what the caller passed.
        expected: the adapter's parameter class.
        what: how the message names the argument, e.g. ``"params"``.
        home: the public module the message names for ``expected``, e.g. ``"quantgate_env.gymnax"``
            (its ``__module__`` is the adapter's own module under ``quantgate_env.adapters``).
    """
    instance_of(what, params, expected, f"{home}.{expected.__qualname__} (e.g. env.default_params)")
