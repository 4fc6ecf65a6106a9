"""Gymnasium adapters: a thin shell around the functional core.

They hold a key and a state, call compiled core functions (scoped to float64 themselves, so an
SB3 user does nothing), and convert to numpy float32. No physics or reward logic lives here.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from gymnasium.vector.utils import batch_space

from ..mdp.single_line import GateEnv, make
from ..precision import x64_scope
from ..validation import check_reset_options, real_array
from .packing import FlatLayout

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


class _Layouts(NamedTuple):
    """How one configuration's parameters and step results pack (``packing``)."""

    params: FlatLayout
    outputs: FlatLayout  # (obs float32, reward, terminated, truncated, info)


def _layouts(core: GateEnv, num_envs: int | None = None) -> _Layouts:
    """The layouts of the single env (``num_envs=None``) or of ``num_envs`` batched envs."""
    key = jax.random.PRNGKey(0)
    with x64_scope():
        if num_envs is None:
            _, state = jax.eval_shape(core.reset, key, core.default_params)
            out = jax.eval_shape(core.step, key, state, jnp.zeros(core.action_space.shape), core.default_params)
        else:
            keys = jax.random.split(key, num_envs)
            _, state = jax.eval_shape(jax.vmap(core.reset, in_axes=(0, None)), keys, core.default_params)
            out = jax.eval_shape(jax.vmap(core.step, in_axes=(0, 0, 0, None)), keys, state,
                                 jnp.zeros((num_envs,) + core.action_space.shape), core.default_params)
    obs, _, reward, terminated, truncated, info = out
    obs = jax.ShapeDtypeStruct(obs.shape, jnp.float32)  # the adapters' observations are float32
    return _Layouts(FlatLayout.of(core.default_params), FlatLayout.of((obs, reward, terminated, truncated, info)))


@functools.cache
def _compiled(core: GateEnv):
    """Compiled reset/next-episode/step of one environment configuration (shared across instances).

    A compiled call pays per array it takes and returns (bench/env_throughput.py prints the floor), so
    the parameters travel as one packed float64 vector and a step's results come back as another
    (``packing``): one device-to-host copy per step. The key and state stay a pytree of device arrays
    between calls: packing them too measured slower (the unpacked state feeds the sector loops) and
    changed the rounding of the batched step. The PRNG key is split inside the compiled calls: an
    eager ``jax.random.split`` per step cost more than the step itself.

    Returns:
        (layouts, reset(key, params) -> ((key, state), obs float32), next_episode((key, state),
        params, key=None) -> ((key, state), obs float32) with ``key`` replacing the carried one when
        given, step((key, state), action, params) -> ((key, state), packed outputs)).
    """
    layouts = _layouts(core)

    def reset(key, params):
        key, sub = jax.random.split(key)
        obs, state = core.reset(sub, layouts.params.unpack(params))
        return (key, state), obs.astype(jnp.float32)

    def next_episode(carry, params, key=None):
        carried, state = carry
        key, sub = jax.random.split(carried if key is None else key)
        obs, state = core.next_episode(sub, state, layouts.params.unpack(params))
        return (key, state), obs.astype(jnp.float32)

    def step(carry, action, params):
        key, state = carry
        key, sub = jax.random.split(key)
        obs, state, reward, terminated, truncated, info = core.step(sub, state, action, layouts.params.unpack(params))
        outputs = layouts.outputs.pack((obs.astype(jnp.float32), reward, terminated, truncated, info))
        return (key, state), outputs

    return layouts, jax.jit(reset), jax.jit(next_episode), jax.jit(step)


def _check_render_mode(render_mode) -> None:
    """Accept what clients pass (SB3's make_vec_env asks for "rgb_array" by default).

    There is nothing to draw, so ``render()`` keeps Gymnasium's NotImplementedError; the mode is
    stored as Gymnasium expects. Only a non-string is an error.
    """
    if render_mode is not None and not isinstance(render_mode, str):
        raise ValueError(f"render_mode: expected None or a string, got {render_mode!r}")


def _device_params(core: GateEnv, layout: FlatLayout) -> jax.Array:
    """The default parameters packed into one device vector, transferred once rather than at every step."""
    with x64_scope():
        return jax.device_put(jax.jit(layout.pack)(core.default_params))


@functools.cache
def _host_unpacker(layout: FlatLayout):
    """``layout.host_unpacker()``, built once per layout (layouts are hashable)."""
    return layout.host_unpacker()


def _unpack_device(flat: jax.Array, layout: FlatLayout):
    """A packed device vector as its pytree of device arrays (for inspection; not the hot path)."""
    with x64_scope():
        return _jitted_unpack(layout)(flat)


@functools.cache
def _jitted_unpack(layout: FlatLayout):
    return jax.jit(layout.unpack)


@functools.cache
def _compiled_vector(core: GateEnv, num_envs: int):
    """Compiled batched reset/autoreset-step (Gymnasium's next-step autoreset semantics).

    As ``_compiled``: parameters and results packed, the key, states and done flags a pytree.

    Returns:
        (layouts, reset(key, params) -> ((key, states, done), obs (N, obs_dim) float32),
        step((key, states, done), actions, params) -> ((key, states, done), packed outputs)).
    """
    layouts = _layouts(core, num_envs)

    def reset(key, params):
        key, sub = jax.random.split(key)
        obs, state = jax.vmap(core.reset, in_axes=(0, None))(jax.random.split(sub, num_envs), layouts.params.unpack(params))
        return (key, state, jnp.zeros(num_envs, bool)), obs.astype(jnp.float32)

    def step(carry, actions, params):
        # Gymnasium 1.x "next_step" autoreset: an env that finished at the previous call is reset
        # now, ignoring its action, and reports reward 0, not terminated, not truncated.
        key, state, done = carry
        params = layouts.params.unpack(params)
        key, sub = jax.random.split(key)  # inside the compiled call: an eager split costs ~100 us
        keys = jax.random.split(sub, num_envs)
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
        outputs = layouts.outputs.pack((obs.astype(jnp.float32), reward, term, trunc, info))
        return (key, new_state, term | trunc), outputs

    return layouts, jax.jit(reset), jax.jit(step)


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
        layouts, self._reset, self._next_episode, self._step = _compiled(self.core)
        self._params = _device_params(self.core, layouts.params)
        self._unpack = _host_unpacker(layouts.outputs)
        self._carry = None  # (key, state) device arrays (``_compiled``); None before the first reset
        self._ended = False  # the episode terminated or truncated: step() needs a reset() first

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode: the first on a device drawn from the drift, later ones per the core's rule.

        Args:
            seed: reseeds ``np_random`` and the PRNG key; ``None`` keeps the running key (one is
                drawn at the first reset).
            options: None or ``{}``: the environment takes no reset options (configure it with
                the options of ``gymnasium.make`` instead).

        Returns:
            obs (obs_dim,) float32 and an empty info dict. After the first reset the next episode
            gets a fresh device with resampled drift, or keeps the same one with fixed drift.

        Raises:
            ValueError: ``options`` is not None or a dict, or holds any key.
        """
        check_reset_options(options)
        super().reset(seed=seed)
        key = None  # None: keep the running key, carried on the device
        if seed is not None or self._carry is None:
            key = jax.random.PRNGKey(int(self.np_random.integers(2**31)))
        with x64_scope():
            if self._carry is None:
                self._carry, obs = self._reset(key, self._params)
            else:  # the core's rule: a fresh device (resampled drift) or the same one (fixed drift)
                self._carry, obs = self._next_episode(self._carry, self._params, key)
        self._ended = False
        return np.asarray(obs), {}

    @property
    def params(self):
        """The environment parameters in use (``EnvParams`` of device arrays)."""
        return _unpack_device(self._params, _compiled(self.core)[0].params)

    @property
    def _state(self):
        """The current ``EnvState`` (device arrays; None before the first reset), for inspection."""
        return None if self._carry is None else self._carry[1]

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
        if self._carry is None:
            raise RuntimeError("step() called before reset()")
        if self._ended:
            # the core would play on past the pulse end (or beyond the bound) with rewards that
            # mean nothing; Gymnasium leaves this undefined, so refuse it as the PettingZoo adapter does
            raise RuntimeError("step() called after the episode ended (terminated or truncated); call reset() first")
        action = _check_action(action, self.action_space.shape)
        with x64_scope():
            self._carry, packed = self._step(self._carry, action, self._params)
        obs, reward, terminated, truncated, info = self._unpack(np.asarray(packed))  # one device-to-host copy
        reward, terminated, truncated = float(reward), bool(terminated), bool(truncated)
        self._ended = terminated or truncated
        return obs, reward, terminated, truncated, info


class GateVectorEnv(gymnasium.vector.VectorEnv):
    """N gate environments stepped in one compiled call (Gymnasium 1.x next-step autoreset).

    ``gymnasium.make_vec("quantgate_env:ZCQPEE-v0", num_envs=N, vectorization_mode="vector_entry_point")``.
    ``autoreset_mode`` other than NEXT_STEP is refused with a pointer to ``quantgate_env.sb3.make_vec_env``
    (same-step auto-reset, as an SB3 ``VecEnv``).
    """

    metadata = {"render_modes": [], "autoreset_mode": gymnasium.vector.AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, render_mode: str | None = None,
                 autoreset_mode: gymnasium.vector.AutoresetMode | str = gymnasium.vector.AutoresetMode.NEXT_STEP,
                 **options):
        _check_render_mode(render_mode)
        self.render_mode = render_mode
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs: expected a positive integer, got {num_envs!r}")
        if autoreset_mode not in (gymnasium.vector.AutoresetMode.NEXT_STEP, "NextStep"):
            # SB3 is the client that needs same-step auto-reset, and it takes no Gymnasium VectorEnv
            raise ValueError(f"autoreset_mode: GateVectorEnv auto-resets on the next step only "
                             f"(AutoresetMode.NEXT_STEP), got {autoreset_mode!r}; for same-step auto-reset in one "
                             "compiled call (SB3's rule) use quantgate_env.sb3.make_vec_env(n_envs, **options), "
                             "or vectorization_mode='sync' for Gymnasium's SyncVectorEnv")
        self.core: GateEnv = make(**options)
        self.num_envs = num_envs
        self.single_observation_space = self.core.observation_space
        self.single_action_space = self.core.action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        layouts, self._reset, self._step = _compiled_vector(self.core, num_envs)
        self._params = _device_params(self.core, layouts.params)
        self._unpack = _host_unpacker(layouts.outputs)
        self._key = None  # host copy of the key last drawn from np_random (the running key is carried)
        self._carry = None  # (key, states, done flags) device arrays (``_compiled_vector``)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start N episodes on devices drawn from the drift.

        Args:
            seed: reseeds ``np_random`` and the PRNG key; ``None`` keeps the running key (one is
                drawn at the first reset).
            options: None or ``{}``: the environment takes no reset options.

        Returns:
            obs (N, obs_dim) float32 and an empty info dict.

        Raises:
            ValueError: ``options`` is not None or a dict, or holds any key.
        """
        check_reset_options(options)
        if seed is not None:
            self._np_random, _ = gymnasium.utils.seeding.np_random(seed)
        with x64_scope():
            if seed is not None or self._carry is None:
                self._key = jax.random.PRNGKey(int(self.np_random.integers(2**31)))
            else:  # keep the running key
                self._key = self._carry[0]
            self._carry, obs = self._reset(self._key, self._params)
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
        if self._carry is None:
            raise RuntimeError("step() called before reset()")
        actions = _check_action(actions, self.action_space.shape, "actions")
        with x64_scope():
            self._carry, packed = self._step(self._carry, actions, self._params)
        return self._unpack(np.asarray(packed))  # one device-to-host copy
