"""Pieces shared by the gymnax and JaxMARL adapters (``quantgate_env.gymnax``, ``quantgate_env.jaxmarl``).

Neither gymnax nor JaxMARL is imported here, so the pieces are testable with the base install.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .env import EnvParams

__all__ = ["check_action_dict", "check_action_shape", "check_params", "episode_reset", "select_where"]


def episode_reset(core, key: jax.Array, finished_state, params: EnvParams):
    """The reset an auto-resetting step performs after ``finished_state``'s episode ended.

    The same choice as ``GateEnv.step_autoreset`` / ``MultiGateEnv.step_autoreset``: a fresh
    device drawn with ``key`` when the configuration resamples drift, else the finished episode's
    own device (fixed drift: every drifted quantity persists across auto-resets). The adapters
    need it apart from the core's auto-resetting step because gymnax's time limit
    (``max_steps_in_episode``) can end an episode the core does not consider finished.

    Args:
        core: a ``GateEnv`` or ``MultiGateEnv``.
        key: PRNG key of the step (the core's auto-resetting step uses the step's key too).
        finished_state: the core state after the step.
        params: the core's ``EnvParams``.

    Returns:
        (obs, state) of the new episode, as the core's ``reset`` returns them.
    """
    env_config = getattr(core.config, "env", core.config)  # MultiGateConfig wraps an EnvConfig
    if env_config.resample_drift:
        return core.reset(key, params)
    return core.reset_to(finished_state.device)


def select_where(done: jax.Array, new: Any, old: Any) -> Any:
    """Leafwise ``new if done else old`` for a () bool ``done`` (pytrees of the same structure)."""
    return jax.tree.map(lambda a, b: jnp.where(done, a, b), new, old)


def check_params(params: Any, expected: type, what: str) -> None:
    """Raise a ValueError unless ``params`` is an instance of ``expected`` (checked before tracing).

    Args:
        params: what the caller passed.
        expected: the adapter's parameter class.
        what: how the message names the argument, e.g. ``"params"``.
    """
    if not isinstance(params, expected):
        raise ValueError(
            f"{what}: expected {expected.__module__}.{expected.__qualname__} (e.g. env.default_params), "
            f"got {type(params).__name__}"
        )


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


def check_action_dict(actions: Any, agents: tuple[str, ...], shape: tuple[int, ...], integer: bool) -> None:
    """Trace-time check of an agent-keyed action dict: exactly one action per agent, each of ``shape``."""
    if not isinstance(actions, Mapping):
        raise ValueError(f"actions: expected a dict {{agent: action}} for agents {agents}, got {type(actions).__name__}")
    missing = [a for a in agents if a not in actions]
    unknown = [a for a in actions if a not in agents]
    if missing or unknown:
        raise ValueError(
            f"actions: expected one action per agent of {agents}, got keys {tuple(actions)}"
            + (f" (missing {missing})" if missing else "") + (f" (unknown {unknown})" if unknown else "")
        )
    for agent in agents:
        check_action_shape(f"actions[{agent!r}]", actions[agent], shape, integer)
