"""The precision a run traces its programs under: x64 only where the environment needs it.

JAX's x64 switch decides the default float of every array a program creates that names no dtype:
the environment's state, rewards, GAE, advantages. The networks are float32 whatever it says
(`common.networks`). XLA's CPU runtime is much slower on small float64 loops (a gymnax CartPole
run under x64 steps its physics in float64), so a run enables x64 only when its environment says
it needs it (docs/contracts.md, "Precision"):

- ``env.requires_x64`` (optional, a bool): True for an environment whose physics must be float64
  (quantgate-env's default ``precision="float64"``); absent or False: the run is float32.
- ``RunSpec.x64`` overrides it (True or False; None: the environment decides).

config.json records what the run used (``"precision": {"x64": ..., "network": "float32"}``), and
a resume traces under that; a config.json without the key was written when every run used x64,
so it resumes under x64, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["env_requires_x64", "run_x64", "precision_record", "recorded_x64"]


def env_requires_x64(env: Any) -> bool:
    """Whether `env` declares that it must be traced under x64 (its ``requires_x64``).

    Args:
        env: a functional environment (docs/contracts.md); ``requires_x64`` is optional.

    Returns:
        The attribute's value; False where the environment has none.

    Raises:
        ValueError: ``requires_x64`` is not a bool.
    """
    value = getattr(env, "requires_x64", False)
    if not isinstance(value, bool):
        raise ValueError(f"env: requires_x64 must be True or False (whether the environment needs "
                         f"JAX's x64 mode), got {value!r} on {type(env).__name__}")
    return value


def run_x64(spec_x64: bool | None, env: Any) -> bool:
    """The x64 setting a new run traces under: the spec's override, else the environment's need.

    Args:
        spec_x64: ``RunSpec.x64`` (True/False: an explicit choice; None: the environment decides).
        env: the run's environment object (None for one stepped from Python: its adapter scopes
            x64 to its own calls).
    """
    if spec_x64 is not None:
        return spec_x64
    return env is not None and env_requires_x64(env)


def precision_record(x64: bool) -> dict[str, Any]:
    """config.json's ``precision`` value for a run traced under `x64`."""
    return {"x64": bool(x64), "network": "float32"}


def recorded_x64(rc: Mapping[str, Any]) -> bool:
    """The x64 setting a run recorded in config.json (`rc`: the file's dict).

    A file without ``precision`` (or without its ``x64``) was written when every run used x64.

    Raises:
        ValueError: ``precision`` is not an object, or its ``x64`` not a boolean (names the key as
            JSON spells it: the caller names the file).
    """
    precision = rc.get("precision")
    if precision is None:
        return True
    if not isinstance(precision, Mapping):
        raise ValueError(f"precision: expected an object like {{\"x64\": true, \"network\": "
                         f"\"float32\"}}, got {precision!r}")
    x64 = precision.get("x64", True)
    if not isinstance(x64, bool):
        raise ValueError(f"precision.x64: expected true or false, got {x64!r}")
    return x64
