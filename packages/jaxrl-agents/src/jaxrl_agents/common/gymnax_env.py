"""A gymnax environment behind the functional step contract (docs/contracts.md).

    jaxrl-train --env jaxrl_agents.common.gymnax_env:make --env-option env_id=CartPole-v1

gymnax (an optional dependency, the extra ``jaxrl-agents[gymnax]``, imported only when `make` is
called; without it `make` raises ImportError naming the extra, which ``jaxrl-train`` prints as one line)
already separates ``terminated`` from the time-limit ``truncated`` in its auto-resetting ``step``.
This adapter gives the contract's three functions over its non-resetting ``step_env``:

- ``reset(key, params)`` -> ``reset_env``;
- ``step(key, state, action, params)``: ``step_env`` (float actions in the default float dtype) plus ``truncated = is_truncated(new state)``
  (the time limit) and ``~terminated`` (a natural end at the limit is a termination), no reset;
- ``step_autoreset``: ``step``, then a fresh ``reset_env`` where the episode ended, the last
  observation kept in ``info["final_obs"]``.

Spaces become gymnasium spaces (Discrete, Box); the episode length is the params'
``max_steps_in_episode``; params are converted to arrays (so the trainer can pass them into its
compiled program) and ``eval_params`` are the default ones. gymnax envs describe no evaluation,
so the trainer records the generic one (return and length).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["GymnaxEnv", "make"]


def _gymnax():
    try:
        import gymnax
    except ImportError as e:  # the optional dependency
        from ..terminal.commands import install_extra  # stdlib only: spells the uv or pip command

        how = install_extra("gymnax", ["jaxrl-train", "--env", "jaxrl_agents.common.gymnax_env:make", "..."])
        raise ImportError(f"jaxrl_agents.common.gymnax_env needs gymnax, the extra jaxrl-agents[gymnax] "
                          f"({e}); install it with: {how}", name="gymnax") from e
    return gymnax


def _to_gymnasium(space):
    """Gymnax Discrete / Box -> gymnasium Discrete / Box."""
    from gymnasium import spaces
    from gymnax.environments import spaces as gx

    if isinstance(space, gx.Discrete):
        return spaces.Discrete(int(space.n))
    if isinstance(space, gx.Box):
        shape = tuple(space.shape)
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape)
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape)
        return spaces.Box(low, high, shape, np.float32)
    raise ValueError(f"env: gymnax space {space!r} is neither Discrete nor Box; the step contract "
                     f"supports those two here")


@dataclasses.dataclass(frozen=True)
class GymnaxEnv:
    """A gymnax environment under the step contract (hashable: a static jit argument).

    Attributes:
        env_id: the gymnax id, e.g. ``"CartPole-v1"``, ``"Pendulum-v1"``.
    """

    env_id: str = "CartPole-v1"

    @functools.cached_property
    def _pair(self):
        gymnax = _gymnax()
        if self.env_id not in gymnax.registered_envs:
            raise ValueError(f"env_id: expected a registered gymnax id (e.g. 'CartPole-v1', "
                             f"'Pendulum-v1'), got {self.env_id!r}")
        return gymnax.make(self.env_id)

    @property
    def _env(self):
        return self._pair[0]

    @property
    def _params(self):
        return self._pair[1]

    @property
    def observation_space(self):
        """The gymnax observation space as a gymnasium Box (float32 bounds)."""
        return _to_gymnasium(self._env.observation_space(self._params))

    @property
    def action_space(self):
        """The gymnax action space as a gymnasium Discrete or Box (float32 bounds)."""
        return _to_gymnasium(self._env.action_space(self._params))

    @property
    def max_episode_steps(self) -> int:
        """The episode length, the default params' ``max_steps_in_episode``."""
        return int(self._params.max_steps_in_episode)

    @property
    def default_params(self) -> Any:
        """The gymnax default params, every leaf converted to an array."""
        # Python numbers -> arrays: the trainer passes params into its compiled program.
        return jax.tree_util.tree_map(jnp.asarray, self._params)

    @property
    def eval_params(self) -> Any:
        """The params of evaluation episodes: the default ones."""
        return self.default_params

    def reset(self, key, params):
        """Start an episode with gymnax's ``reset_env``.

        Args:
            key: PRNG key.
            params: the params pytree (``default_params``).

        Returns:
            ``(obs, state)`` as gymnax returns them.
        """
        return self._env.reset_env(key, params)

    def step(self, key, state, action, params):
        """One non-resetting gymnax ``step_env``, with ``terminated`` and ``truncated`` separated.

        Float actions are cast to the default float dtype first (float64 under x64), so the state's
        float leaves keep reset's dtype.

        Args:
            key: PRNG key.
            state: the gymnax state.
            action: int (Discrete) or float (Box) action.
            params: the params pytree.

        Returns:
            ``(obs, state, reward, terminated, truncated, info)``: reward a scalar of the default float
            dtype; ``terminated`` = gymnax's done (bool); ``truncated`` = the time limit and not
            terminated (bool); info gymnax's info as a dict.
        """
        if jnp.issubdtype(jnp.asarray(action).dtype, jnp.floating):
            # The agent's float32 action would make float leaves of the state (Pendulum's last_u)
            # float32 where reset made them float64 under x64: lax.scan needs one dtype.
            action = jnp.asarray(action, jnp.result_type(float))
        obs, state, reward, done, info = self._env.step_env(key, state, action, params)
        terminated = jnp.asarray(done, bool)
        truncated = jnp.asarray(self._env.is_truncated(state, params), bool) & ~terminated
        return obs, state, jnp.asarray(reward, jnp.result_type(float)), terminated, truncated, \
            dict(info)

    def step_autoreset(self, key, state, action, params):
        """`step`, then a fresh ``reset_env`` where the episode ended (terminated or truncated).

        Args:
            key: PRNG key, split between the step and the reset.
            state: the gymnax state.
            action: int (Discrete) or float (Box) action.
            params: the params pytree.

        Returns:
            `step`'s six values with obs and state those of the new episode where it ended, and
            ``info["final_obs"]`` the step's own observation (the finished episode's last).
        """
        k_step, k_reset = jax.random.split(key)
        obs, new_state, reward, term, trunc, info = self.step(k_step, state, action, params)
        obs_reset, state_reset = self.reset(k_reset, params)
        done = term | trunc
        new_state = jax.tree_util.tree_map(lambda r, s: jnp.where(done, r, s), state_reset,
                                           new_state)
        info = {**info, "final_obs": obs}
        return jnp.where(done, obs_reset, obs), new_state, reward, term, trunc, info


def make(env_id: str = "CartPole-v1") -> GymnaxEnv:
    """Factory for ``jaxrl-train --env jaxrl_agents.common.gymnax_env:make``.

    Args:
        env_id: a registered gymnax id (``CartPole-v1``, ``Pendulum-v1``, ...).

    Raises:
        ValueError: `env_id` is not a string or not registered; ImportError without gymnax.
    """
    if not isinstance(env_id, str):
        raise ValueError(f"env_id: expected a gymnax id string, got {env_id!r}")
    env = GymnaxEnv(env_id)
    env._pair  # noqa: B018 (build now: an unknown id fails here, not inside the trainer)
    return env
