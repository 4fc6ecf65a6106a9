"""Gymnasium adapters: a thin shell around the functional core.

They hold a key and a state, call compiled core functions (scoped to float64 themselves, so an
SB3 user does nothing), and convert to numpy float32. No physics or reward logic lives here.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from gymnasium.vector.utils import batch_space

from .env import GateEnv, make
from .precision import x64_scope
from .validation import real_array

__all__ = ["GateGymEnv", "GateVectorEnv"]


def _check_action(action: Any, shape: tuple[int, ...], name: str = "action") -> np.ndarray:
    """Actions as float64 with the expected shape.

    NaN, a wrong shape or entries that are not real numbers (strings, bools, complex: never
    coerced) raise ValueError.
    """
    array = real_array(name, action)
    if array.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: expected finite values, got {array}")
    return array


@functools.cache
def _compiled(core: GateEnv):
    """Compiled reset/step of one environment configuration (shared across instances).

    The PRNG key is split inside the compiled calls: an eager ``jax.random.split`` per step cost
    more than the step itself (bench/env_throughput.py). Outputs come back as one pytree so the
    adapter fetches them with a single transfer.
    """

    def reset(key, params):
        key, sub = jax.random.split(key)
        obs, state = core.reset(sub, params)
        return key, state, obs.astype(jnp.float32)

    def next_episode(key, state, params):
        key, sub = jax.random.split(key)
        obs, state = core.next_episode(sub, state, params)
        return key, state, obs.astype(jnp.float32)

    def step(key, state, action, params):
        key, sub = jax.random.split(key)
        obs, state, reward, terminated, truncated, info = core.step(sub, state, action, params)
        # One flat float64 vector: a device-to-host copy per array cost ~10 us each.
        packed = jnp.concatenate([jnp.ravel(x).astype(jnp.float64) for x in jax.tree.leaves((obs, reward, terminated, truncated, info))])
        return key, state, packed

    return jax.jit(reset), jax.jit(next_episode), jax.jit(step)


@functools.cache
def _output_layout(core: GateEnv):
    """How to cut the packed step output back into (obs, reward, terminated, truncated, info)."""
    with x64_scope():
        obs, state = jax.eval_shape(core.reset, jax.random.PRNGKey(0), core.default_params)
        outputs = jax.eval_shape(core.step, jax.random.PRNGKey(0), state, jnp.zeros(core.action_space.shape), core.default_params)
    obs, _, reward, terminated, truncated, info = outputs
    leaves, treedef = jax.tree.flatten((obs, reward, terminated, truncated, info))
    return treedef, [(leaf.shape, leaf.dtype) for leaf in leaves]


def _unpack(core: GateEnv, packed: np.ndarray):
    treedef, layout = _output_layout(core)
    leaves, start = [], 0
    for shape, dtype in layout:
        size = int(np.prod(shape))
        leaves.append(packed[start:start + size].reshape(shape).astype(dtype))
        start += size
    obs, reward, terminated, truncated, info = jax.tree.unflatten(treedef, leaves)
    return obs.astype(np.float32), float(reward), bool(terminated), bool(truncated), info


def _check_render_mode(render_mode) -> None:
    """Accept what clients pass (SB3's make_vec_env asks for "rgb_array" by default).

    There is nothing to draw, so ``render()`` keeps Gymnasium's NotImplementedError; the mode is
    stored as Gymnasium expects. Only a non-string is an error.
    """
    if render_mode is not None and not isinstance(render_mode, str):
        raise ValueError(f"render_mode: expected None or a string, got {render_mode!r}")


def _device_params(core: GateEnv):
    """The default parameters as device arrays, transferred once rather than at every step."""
    with x64_scope():
        return jax.device_put(core.default_params)


@functools.cache
def _compiled_vector(core: GateEnv):
    """Compiled batched reset/autoreset-step (Gymnasium's next-step autoreset semantics)."""

    def reset(key, params, num_envs):
        key, sub = jax.random.split(key)
        obs, state = jax.vmap(core.reset, in_axes=(0, None))(jax.random.split(sub, num_envs), params)
        return key, obs.astype(jnp.float32), state

    def step(key, state, actions, params, done):
        # Gymnasium 1.x "next_step" autoreset: an env that finished at the previous call is reset
        # now, ignoring its action, and reports reward 0, not terminated, not truncated.
        key, sub = jax.random.split(key)  # inside the compiled call: an eager split costs ~100 us
        keys = jax.random.split(sub, done.shape[0])
        obs, new_state, reward, term, trunc, info = jax.vmap(core.step, in_axes=(0, 0, 0, None))(keys, state, actions, params)
        reset_obs, reset_state = jax.vmap(core.next_episode, in_axes=(0, 0, None))(keys, state, params)

        def pick(a, b):
            mask = done.reshape(done.shape + (1,) * (a.ndim - 1))
            return jnp.where(mask, a, b)

        new_state = jax.tree.map(pick, reset_state, new_state)
        obs = pick(reset_obs, obs)
        reward = jnp.where(done, 0.0, reward)
        term = term & ~done
        trunc = trunc & ~done
        return key, new_state, (obs.astype(jnp.float32), reward, term, trunc, info)

    return jax.jit(reset, static_argnums=2), jax.jit(step)


class GateGymEnv(gymnasium.Env):
    """``gymnasium.make("quantgate_env:ZCQPEE-v0", **options)``: the paper's MDP by default.

    Observations: Box (obs_dim,) float32; actions: Box (K,) float32 in [-1, 1] (values outside
    are clipped, as SB3 and v1 do; NaN, a wrong shape, strings, bools or complex numbers raise
    ValueError). ``step`` after a terminated or truncated step raises RuntimeError until ``reset``
    (the vectorised env auto-resets instead). ``info`` holds JT,
    concurrence, unitarity, tv_penalty, oob, t (ns) and amps (rad/ns). With fixed drift the
    device is drawn at the first reset and kept for the life of the instance.
    """

    metadata = {"render_modes": []}

    def __init__(self, render_mode: str | None = None, **options):
        _check_render_mode(render_mode)
        self.render_mode = render_mode
        self.core: GateEnv = make(**options)
        self.observation_space = self.core.observation_space
        self.action_space = self.core.action_space
        self.params = _device_params(self.core)
        self._reset, self._next_episode, self._step = _compiled(self.core)
        self._key = None
        self._state = None
        self._ended = False  # the episode terminated or truncated: step() needs a reset() first

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode: the first on a device drawn from the drift, later ones per the core's rule.

        Args:
            seed: reseeds ``np_random`` and the PRNG key; ``None`` keeps the running key (one is
                drawn at the first reset).
            options: ignored (accepted for the Gymnasium signature).

        Returns:
            obs (obs_dim,) float32 and an empty info dict. After the first reset the next episode
            gets a fresh device with resampled drift, or keeps the same one with fixed drift.
        """
        super().reset(seed=seed)
        if seed is not None or self._key is None:
            self._key = jax.random.PRNGKey(int(self.np_random.integers(2**31)))
        with x64_scope():
            if self._state is None:
                self._key, self._state, obs = self._reset(self._key, self.params)
            else:  # the core's rule: a fresh device (resampled drift) or the same one (fixed drift)
                self._key, self._state, obs = self._next_episode(self._key, self._state, self.params)
        self._ended = False
        return np.asarray(obs), {}

    def step(self, action):
        """Play one segment of K pulse samples.

        Args:
            action: (K,) deltas in units of the line's ``delta``, clipped to [-1, 1].

        Returns:
            obs (obs_dim,) float32, reward (float), terminated, truncated (bool), info: JT,
            concurrence, unitarity, tv_penalty, oob, t (ns) and amps (K,) rad/ns.

        Raises:
            RuntimeError: before ``reset`` or after the episode ended, until ``reset``.
            ValueError: NaN, a wrong shape, strings, bools or complex numbers in ``action``.
        """
        if self._state is None:
            raise RuntimeError("step() called before reset()")
        if self._ended:
            # the core would play on past the pulse end (or beyond the bound) with rewards that
            # mean nothing; Gymnasium leaves this undefined, so refuse it as the PettingZoo adapter does
            raise RuntimeError("step() called after the episode ended (terminated or truncated); call reset() first")
        action = _check_action(action, self.action_space.shape)
        with x64_scope():
            self._key, self._state, packed = self._step(self._key, self._state, action, self.params)
            packed = np.asarray(packed)
        obs, reward, terminated, truncated, info = _unpack(self.core, packed)
        self._ended = terminated or truncated
        return obs, reward, terminated, truncated, info


class GateVectorEnv(gymnasium.vector.VectorEnv):
    """N gate environments stepped in one compiled call (Gymnasium 1.x next-step autoreset).

    ``gymnasium.make_vec("quantgate_env:ZCQPEE-v0", num_envs=N, vectorization_mode="vector_entry_point")``.
    """

    metadata = {"render_modes": [], "autoreset_mode": gymnasium.vector.AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, render_mode: str | None = None, **options):
        _check_render_mode(render_mode)
        self.render_mode = render_mode
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs: expected a positive integer, got {num_envs!r}")
        self.core: GateEnv = make(**options)
        self.num_envs = num_envs
        self.single_observation_space = self.core.observation_space
        self.single_action_space = self.core.action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.params = _device_params(self.core)
        self._reset, self._step = _compiled_vector(self.core)
        self._key = None
        self._state = None
        self._done = np.zeros(num_envs, dtype=bool)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start N episodes on devices drawn from the drift.

        Args:
            seed: reseeds ``np_random`` and the PRNG key; ``None`` keeps the running key (one is
                drawn at the first reset).
            options: ignored (accepted for the Gymnasium signature).

        Returns:
            obs (N, obs_dim) float32 and an empty info dict.
        """
        if seed is not None:
            self._np_random, _ = gymnasium.utils.seeding.np_random(seed)
        if seed is not None or self._key is None:
            self._key = jax.random.PRNGKey(int(self.np_random.integers(2**31)))
        with x64_scope():
            self._key, obs, self._state = self._reset(self._key, self.params, self.num_envs)
        self._done[:] = False
        return np.asarray(obs), {}

    def step(self, actions):
        """Step all N environments in one compiled call, with next-step autoreset.

        An environment that finished at the previous call is reset now instead: its action is
        ignored and it reports reward 0, not terminated, not truncated.

        Args:
            actions: (N, K) deltas in units of the line's ``delta``, clipped to [-1, 1].

        Returns:
            obs (N, obs_dim) float32, reward (N,), terminated (N,) bool, truncated (N,) bool and
            info, each field with leading axis N (JT, ..., t ns, amps (N, K) rad/ns).

        Raises:
            RuntimeError: before ``reset``.
            ValueError: NaN, a wrong shape, strings, bools or complex numbers in ``actions``.
        """
        if self._state is None:
            raise RuntimeError("step() called before reset()")
        actions = _check_action(actions, self.action_space.shape, "actions")
        with x64_scope():
            self._key, self._state, outputs = self._step(self._key, self._state, actions, self.params, self._done)
            obs, reward, term, trunc, info = jax.device_get(outputs)
        self._done = term | trunc
        return obs, reward, term, trunc, info
