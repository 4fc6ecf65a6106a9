"""Naming, building and checking functional environments (the contract in docs/contracts.md).

The CLI names an environment as ``module:factory`` (the convention of ``uvicorn app:main``), imports
it at run time and calls ``factory(**options)``; jaxrl-agents never imports an environment package
itself. `check_env` verifies the contract with abstract evaluation only (`jax.eval_shape`, nothing is
compiled), so a wrong environment fails in seconds with a message that says what is missing.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["load_env", "check_env", "parse_env_options", "DEFAULT_ENV"]

DEFAULT_ENV = "quantgate_env:make"

_REQUIRED_CALLABLES = ("reset", "step", "step_autoreset")
_REQUIRED_ATTRS = ("observation_space", "action_space", "max_episode_steps", "default_params",
                   "eval_params")


def parse_env_options(items: list[str] | None, flag: str = "--env-option") -> dict[str, Any]:
    """Parse ``["KEY=VALUE", ...]``: VALUE as JSON when possible (1, 0.5, true, null, [1, 2]),
    Python's True/False/None, else a plain string. `flag` names the option in errors."""
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"{flag}: expected KEY=VALUE, got {item!r}")
        key, raw = item.split("=", 1)
        key = key.strip().replace("-", "_")
        if not key.isidentifier():
            raise ValueError(f"{flag}: expected a Python identifier as KEY, got {key!r}")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = {"True": True, "False": False, "None": None}.get(raw, raw)
        out[key] = value
    return out


def load_env(spec: str, options: Mapping[str, Any] | None = None, check: bool = True):
    """Import ``module:factory``, call it with `options`, check the result.

    Args:
        spec: "module.path:factory_name".
        options: keyword arguments of the factory.
        check: verify the functional step contract (`check_env`); False for other kinds of
            environment (IPPO's PettingZoo ParallelEnvs, which it validates itself).

    Returns:
        The environment object (checked with `check_env`).

    Raises:
        ValueError: malformed spec, missing module or factory, rejected options, non-conforming env.
    """
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise ValueError(f"env: expected 'module:factory' (e.g. {DEFAULT_ENV!r}), got {spec!r}")
    module_name, factory_name = spec.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise ValueError(f"env: cannot import module {module_name!r} of {spec!r} ({e}); is the "
                         f"package installed and on the Python path?") from e
    factory = getattr(module, factory_name, None)
    if factory is None or not callable(factory):
        raise ValueError(f"env: module {module_name!r} has no callable {factory_name!r} "
                         f"(from {spec!r})")
    options = dict(options or {})
    try:
        env = factory(**options)
    except TypeError as e:
        raise ValueError(f"env options: {spec} rejected {sorted(options)}: {e}") from e
    if check:
        check_env(env, name=spec)
    return env


def check_env(env, name: str = "env") -> None:
    """Check that `env` follows the functional step contract, without compiling anything.

    Verifies the members, that the env is hashable (it becomes a static argument of `jit`), the
    spaces, and, by abstract evaluation of reset / step / step_autoreset on ``default_params``, the
    shapes: obs matches the observation space, reward / terminated / truncated are scalars, info has
    the same structure after step and step_autoreset, and step_autoreset provides info["final_obs"].
    """
    from gymnasium import spaces

    missing = [m for m in _REQUIRED_CALLABLES if not callable(getattr(env, m, None))]
    missing += [a for a in _REQUIRED_ATTRS if not hasattr(env, a)]
    if missing:
        raise ValueError(f"{name}: the factory returned {type(env).__name__}, which lacks {missing}; "
                         f"expected an environment with reset, step, step_autoreset, "
                         f"observation_space, action_space, max_episode_steps, default_params, "
                         f"eval_params (docs/contracts.md)")
    try:
        hash(env)
    except TypeError as e:
        raise ValueError(f"{name}: expected a hashable environment (a frozen dataclass), got an "
                         f"unhashable {type(env).__name__}") from e
    if not isinstance(env.observation_space, spaces.Box) or len(env.observation_space.shape) != 1:
        raise ValueError(f"{name}: expected observation_space to be a 1-D gymnasium Box, got "
                         f"{env.observation_space!r}")
    if not isinstance(env.action_space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete)):
        raise ValueError(f"{name}: expected action_space to be a Box, Discrete or MultiDiscrete, got "
                         f"{env.action_space!r}")
    steps = env.max_episode_steps
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps <= 0:
        raise ValueError(f"{name}: expected max_episode_steps to be a positive int, got {steps!r}")

    key = jax.random.PRNGKey(0)
    params = env.default_params
    try:
        obs, state = jax.eval_shape(env.reset, key, params)
    except Exception as e:
        raise ValueError(f"{name}: reset(key, default_params) failed: {e}") from e
    if tuple(obs.shape) != tuple(env.observation_space.shape):
        raise ValueError(f"{name}: reset returned obs of shape {tuple(obs.shape)}, expected "
                         f"{env.observation_space.shape} (observation_space)")
    sample = env.action_space.sample()
    action = jax.ShapeDtypeStruct(np.shape(sample), jnp.asarray(sample).dtype)
    for method in ("step", "step_autoreset"):
        try:
            out = jax.eval_shape(getattr(env, method), key, state, action, params)
        except Exception as e:
            raise ValueError(f"{name}: {method}(key, state, action, default_params) failed: {e}") from e
        if not isinstance(out, tuple) or len(out) != 6:
            raise ValueError(f"{name}: {method} must return (obs, state, reward, terminated, "
                             f"truncated, info), got {type(out).__name__} of length "
                             f"{len(out) if isinstance(out, tuple) else '?'}")
        obs2, _, reward, term, trunc, info = out
        if tuple(obs2.shape) != tuple(obs.shape):
            raise ValueError(f"{name}: {method} returned obs of shape {tuple(obs2.shape)}, "
                             f"expected {tuple(obs.shape)}")
        for what, x in (("reward", reward), ("terminated", term), ("truncated", trunc)):
            if tuple(x.shape) != ():
                raise ValueError(f"{name}: {method} returned {what} of shape {tuple(x.shape)}, "
                                 f"expected a scalar per environment")
        for what, x in (("terminated", term), ("truncated", trunc)):
            if x.dtype != jnp.bool_:
                raise ValueError(f"{name}: {method} returned {what} of dtype {x.dtype}, expected bool")
        if not isinstance(info, Mapping):
            raise ValueError(f"{name}: {method} returned info of type {type(info).__name__}, "
                             f"expected a dict")
        if method == "step":
            step_info_keys = set(info)
        elif "final_obs" not in info:
            raise ValueError(f"{name}: step_autoreset must put the last observation of a finished "
                             f"episode in info['final_obs']; info has {sorted(info)}")
        elif set(info) - {"final_obs"} != step_info_keys:
            raise ValueError(f"{name}: step_autoreset info keys {sorted(set(info) - {'final_obs'})} "
                             f"differ from step info keys {sorted(step_info_keys)}")
