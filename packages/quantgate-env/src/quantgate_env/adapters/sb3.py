"""Stable-Baselines3 vector environment: N gate environments in one compiled, same-step auto-resetting call.

SB3 takes a Gymnasium ``Env`` (it wraps it in its own ``DummyVecEnv``) or an SB3 ``VecEnv``; a
Gymnasium ``VectorEnv`` such as ``GateVectorEnv`` is neither, and its next-step auto-reset is not
SB3's rule anyway. SB3's rule (``DummyVecEnv.step_wait``): an environment that finishes is reset in
the same step, its last observation goes into ``infos[i]["terminal_observation"]``,
``infos[i]["TimeLimit.truncated"]`` says it was truncated rather than terminated (SB3 then
bootstraps from that observation), and the returned observation is the new episode's first.

``make_vec_env(n_envs, **options)`` gives exactly that over the functional core's own
``GateEnv.step_autoreset`` (step, then ``next_episode`` where the episode ended, the finished
episode's last observation kept), vmapped over the N environments and compiled once per
configuration: one call per step for all N, where ``DummyVecEnv`` makes N Python calls. Each
environment carries its own PRNG key and splits it as ``GateGymEnv`` does, so with the same seeds the
drawn devices (domain randomisation) are those of SB3's ``DummyVecEnv`` over
``gymnasium.make("quantgate_env:ZCQPEE-v0")`` as well.

SB3 is imported only when a ``GateSB3VecEnv`` is built (SB3's ``VecEnv`` base class, which SB3's
``isinstance`` checks require, is looked up then): ``quantgate-env`` itself depends on neither SB3
nor torch.
"""

from __future__ import annotations

import functools
import numbers
from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from ..mdp.single_line import GateEnv, make
from ..precision import x64_scope
from ..validation import check_reset_options
from .gymnasium import _check_action, _check_render_mode, _device_params, _host_unpacker
from .packing import FlatLayout

__all__ = ["make_vec_env", "vec_env_class"]  # and GateSB3VecEnv, built on first access (module __getattr__)

_SB3_MISSING = ("quantgate_env.sb3 needs Stable-Baselines3 (its VecEnv base class): "
                "pip install stable-baselines3")


def _per_env_functions(core: GateEnv):
    """One environment's first reset, next reset and step, with ``GateGymEnv``'s key chain.

    ``GateGymEnv`` splits its key once per reset and once per step (``gymnasium._compiled``), and
    ``DummyVecEnv`` resets a finished environment right after its step; these functions make the
    same splits in the same order, so seeded runs draw the same devices as ``DummyVecEnv``.
    """

    def first_reset(key, params):
        key, sub = jax.random.split(key)
        obs, state = core.reset(sub, params)
        return key, state, obs

    def next_reset(key, state, params):
        key, sub = jax.random.split(key)
        obs, state = core.next_episode(sub, state, params)
        return key, state, obs

    def step(key, state, action, params):
        key, _ = jax.random.split(key)  # GateGymEnv's per-step split (the MDP's step uses no randomness)
        key_after_reset, sub = jax.random.split(key)  # GateGymEnv.reset() right after a finished step
        obs, state, reward, terminated, truncated, info = core.step_autoreset(sub, state, action, params)
        final_obs = info.pop("final_obs")
        key = jnp.where(terminated | truncated, key_after_reset, key)
        return key, state, (obs, reward, terminated, truncated, info, final_obs)

    return first_reset, next_reset, step


@functools.cache
def _compiled_same_step(core: GateEnv, num_envs: int):
    """Compiled batched reset and same-step auto-resetting step of one configuration and N.

    As the Gymnasium adapters (``gymnasium._compiled``): the parameters travel as one packed
    float64 vector and a step's results come back as another (one device-to-host copy per step);
    keys and states stay a pytree of device arrays between calls.

    Returns:
        (params layout, outputs layout, the info's keys,
        reset(keys (N, 2), params) -> ((keys, states), obs (N, obs_dim) float32),
        reset_next((keys, states), new_keys (N, 2), use_new (N,) bool, params) -> same,
        step((keys, states), actions (N, K), params) -> ((keys, states), packed (obs float32,
        reward, terminated, truncated, info, final_obs float32))).
    """
    first_reset, next_reset, step_one = _per_env_functions(core)
    params_layout = FlatLayout.of(core.default_params)

    def reset(keys, params):
        keys, states, obs = jax.vmap(first_reset, in_axes=(0, None))(keys, params_layout.unpack(params))
        return (keys, states), obs.astype(jnp.float32)

    def reset_next(carry, new_keys, use_new, params):
        keys = jnp.where(use_new[:, None], new_keys, carry[0])
        keys, states, obs = jax.vmap(next_reset, in_axes=(0, 0, None))(keys, carry[1], params_layout.unpack(params))
        return (keys, states), obs.astype(jnp.float32)

    def unpacked_step(carry, actions, params):
        keys, states, out = jax.vmap(step_one, in_axes=(0, 0, 0, None))(*carry, actions, params_layout.unpack(params))
        obs, reward, terminated, truncated, info, final_obs = out
        return (keys, states), (obs.astype(jnp.float32), reward, terminated, truncated, info,
                                final_obs.astype(jnp.float32))

    with x64_scope():
        keys = jnp.zeros((num_envs, 2), jnp.uint32)
        carry = jax.eval_shape(reset, keys, jnp.zeros(params_layout.size))[0]
        actions = jnp.zeros((num_envs,) + core.action_space.shape)
        outputs = jax.eval_shape(unpacked_step, carry, actions, jnp.zeros(params_layout.size))[1]
    outputs_layout = FlatLayout.of(outputs)

    def step(carry, actions, params):
        carry, outputs = unpacked_step(carry, actions, params)
        return carry, outputs_layout.pack(outputs)

    return params_layout, outputs_layout, tuple(outputs[4]), jax.jit(reset), jax.jit(reset_next), jax.jit(step)


def _check_n_envs(n_envs: Any) -> int:
    if isinstance(n_envs, bool) or not isinstance(n_envs, numbers.Integral) or n_envs < 1:
        raise ValueError(f"n_envs: expected a positive integer, got {n_envs!r}")
    return int(n_envs)


def _check_seed(seed: Any) -> int | None:
    # Gymnasium seeds are non-negative integers; SB3's VecEnv.seed(s) gives environment i the seed s + i
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0):
        raise ValueError(f"seed: expected None or a non-negative integer (environment i is seeded with seed + i, "
                         f"as SB3's VecEnv.seed does), got {seed!r}")
    return None if seed is None else int(seed)


def _key(seed: int) -> np.ndarray:
    """The PRNG key ``GateGymEnv.reset(seed=seed)`` draws (its np_random, then one integer)."""
    np_random, _ = gymnasium.utils.seeding.np_random(seed)
    return _key_of(int(np_random.integers(2**31)))


def _key_of(value: int) -> np.ndarray:
    return np.asarray(jax.random.PRNGKey(value))


class _GateSB3VecEnvImpl:
    """The body of ``GateSB3VecEnv``, free of SB3 so that this module imports without it.

    ``vec_env_class()`` puts SB3's ``VecEnv`` after it in the bases; ``super().__init__`` is then
    ``VecEnv.__init__``.
    """

    def __init__(self, n_envs: int = 1, render_mode: str | None = None, **options):
        n_envs = _check_n_envs(n_envs)
        _check_render_mode(render_mode)
        self.core: GateEnv = make(**options)  # bad options: a ValueError naming the option
        self.render_mode = render_mode
        compiled = _compiled_same_step(self.core, n_envs)
        params_layout, outputs_layout, info_keys, self._reset, self._reset_next, self._step = compiled
        self._params = _device_params(self.core, params_layout)
        self._unpack = _host_unpacker(outputs_layout)
        self._rng = np.random.default_rng()  # keys of environments reset for the first time without a seed
        self._carry = None  # (keys (N, 2), states) device arrays; None before the first reset
        self._actions = None
        self._info_keys = info_keys
        super().__init__(n_envs, self.core.observation_space, self.core.action_space)  # SB3: calls get_attr("render_mode")

    # ---- SB3's VecEnv interface ------------------------------------------------------------

    def reset(self) -> np.ndarray:
        """Start N episodes (SB3's ``VecEnv.reset``): (N, obs_dim) float32 observations.

        Seeds set by ``seed(s)`` (environment i gets s + i) and reset options are used once, as
        ``DummyVecEnv`` uses them. The first reset draws each environment's device from the drift;
        a later one starts each environment's next episode by the core's rule (a fresh device with
        resampled drift, the same one with fixed drift), with a fresh key where a seed was set.

        Raises:
            ValueError: reset options were set (``set_options``): the environment takes none.
        """
        for options in self._options:
            check_reset_options(options)
        seeded = [seed is not None for seed in self._seeds]
        with x64_scope():
            if self._carry is None:
                keys = np.stack([_key(seed) if seed is not None else _key_of(int(self._rng.integers(2**31)))
                                 for seed in self._seeds])
                self._carry, obs = self._reset(keys, self._params)
            else:
                keys = np.stack([_key(seed) if seed is not None else _key_of(0) for seed in self._seeds])
                self._carry, obs = self._reset_next(self._carry, keys, np.asarray(seeded), self._params)
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return np.array(obs)  # a writable copy, as DummyVecEnv's (np.asarray of a jax array is read-only)

    def step_async(self, actions: np.ndarray) -> None:
        """Take (N, K) actions for the next ``step_wait`` (checked here, before any compiled call).

        Raises:
            RuntimeError: before ``reset``.
            ValueError: NaN, a wrong shape, strings, bools or complex numbers in ``actions``.
        """
        if self._carry is None:
            raise RuntimeError("step_async() called before reset()")
        self._actions = _check_action(actions, (self.num_envs,) + self.action_space.shape, "actions")

    def step_wait(self):
        """Step all N environments in one compiled call, resetting finished ones in the same step.

        Returns:
            obs (N, obs_dim) float32 (a new episode's first observation where one ended), rewards
            (N,) float32, dones (N,) bool, and N info dicts: the single env's info (JT,
            concurrence, unitarity, tv_penalty, oob, t, amps), "TimeLimit.truncated" (truncated
            and not terminated: out of bounds in ``oob_mode="terminate"``) and, where done,
            "terminal_observation" (the finished episode's last observation), as ``DummyVecEnv``.
        """
        if self._actions is None:
            raise RuntimeError("step_wait() called without step_async(actions)")
        actions, self._actions = self._actions, None
        with x64_scope():
            self._carry, packed = self._step(self._carry, actions, self._params)
        obs, reward, terminated, truncated, info, final_obs = self._unpack(np.asarray(packed))  # one copy
        dones = terminated | truncated
        time_limit = (truncated & ~terminated).tolist()
        columns = [info[key] for key in self._info_keys]
        infos = [dict(zip(self._info_keys, row), **{"TimeLimit.truncated": cut})
                 for row, cut in zip(zip(*columns), time_limit)]
        for i in np.flatnonzero(dones):
            infos[i]["terminal_observation"] = final_obs[i]
        return obs, reward.astype(np.float32), dones, infos

    def close(self) -> None:
        """Nothing to release (the compiled functions are shared by configuration)."""

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        """An attribute of the single environment, once per index (they share one configuration).

        Attributes: ``core``, ``render_mode``, ``observation_space`` and ``action_space`` (one
        environment's spaces, as ``DummyVecEnv`` reports them).
        """
        if attr_name not in _ENV_ATTRS:
            raise AttributeError(f"{type(self).__name__}: the environments have no attribute {attr_name!r} "
                                 f"(they have {sorted(_ENV_ATTRS)})")
        value = getattr(self, attr_name)
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        """Refused: the N environments share one compiled configuration."""
        raise ValueError(f"set_attr: {attr_name!r} cannot be set: the {self.num_envs} environments share one compiled "
                         "configuration; build a new vector env with other options instead")

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list[Any]:
        """Refused: there is no per-environment object to call (one compiled step runs them all)."""
        raise ValueError(f"env_method: {method_name!r} cannot be called: the {self.num_envs} environments are one "
                         "compiled step with no per-environment object")

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        """No environment is wrapped (wrap the whole VecEnv, e.g. in ``VecMonitor``)."""
        return [False for _ in self._get_indices(indices)]

    def _get_indices(self, indices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, numbers.Integral):
            return [int(indices)]
        return list(indices)

    # ---- inspection (not the hot path) ------------------------------------------------------

    @property
    def states(self):
        """The N current ``EnvState``s as one batched pytree of device arrays (None before ``reset``)."""
        return None if self._carry is None else self._carry[1]


_ENV_ATTRS = frozenset({"core", "render_mode", "observation_space", "action_space"})


@functools.cache
def vec_env_class() -> type:
    """``GateSB3VecEnv``: built on first use, a subclass of SB3's ``VecEnv`` (SB3 imported now).

    Raises:
        ImportError: Stable-Baselines3 is not installed (the message says what to install).
    """
    try:
        from stable_baselines3.common.vec_env import VecEnv
    except ImportError as error:
        raise ImportError(_SB3_MISSING) from error

    cls = type("GateSB3VecEnv", (_GateSB3VecEnvImpl, VecEnv), {
        "__module__": __name__,
        "__qualname__": "GateSB3VecEnv",
        "__doc__": _CLASS_DOC,
    })
    return cls


_CLASS_DOC = """N gate environments as an SB3 ``VecEnv``: one compiled call per step, same-step auto-reset.

``GateSB3VecEnv(n_envs, **options)`` takes the options of ``quantgate_env.make`` (those of
``gymnasium.make("quantgate_env:ZCQPEE-v0", ...)``); ``make_vec_env`` builds it and by default wraps it
in SB3's ``VecMonitor`` (episode returns and lengths for SB3's logger). Outputs equal SB3's
``DummyVecEnv`` over ``gymnasium.make("quantgate_env:ZCQPEE-v0", **options)`` with the same seeds
and actions, within float rounding (the batched step may round in the last bit).
"""


def make_vec_env(n_envs: int = 1, *, seed: int | None = None, monitor: bool = True,
                 render_mode: str | None = None, **options):
    """N gate environments as an SB3 ``VecEnv`` stepped in one compiled call.

    The counterpart of SB3's ``make_vec_env("quantgate_env:ZCQPEE-v0", n_envs, seed=...)``
    (``DummyVecEnv`` of N Gymnasium envs, each in a ``Monitor``), with the same outputs::

        venv = quantgate_env.sb3.make_vec_env(64, seed=0, oob_mode="terminate")
        PPO("MlpPolicy", venv).learn(100_000)

    Args:
        n_envs: number of environments N (a positive integer).
        seed: None, or environment i's first reset uses seed + i (SB3's ``VecEnv.seed``); SB3
            models built with ``seed=`` reseed the environment themselves.
        monitor: wrap in SB3's ``VecMonitor`` (``info["episode"]`` at episode ends, which SB3's
            ``ep_rew_mean`` logs read; ``make_vec_env`` wraps each env in ``Monitor`` for that).
        render_mode: accepted and stored as Gymnasium envs do (nothing is drawn).
        **options: the environment's options (``quantgate_env.make``): ``oob_mode``, drift, ...

    Returns:
        A ``GateSB3VecEnv`` (in a ``VecMonitor`` if ``monitor``).

    Raises:
        ValueError: a bad ``n_envs``, ``seed``, ``monitor`` or option, before anything compiles.
        ImportError: Stable-Baselines3 is not installed.
    """
    n_envs = _check_n_envs(n_envs)
    seed = _check_seed(seed)
    if not isinstance(monitor, bool):
        raise ValueError(f"monitor: expected True or False, got {monitor!r}")
    _check_render_mode(render_mode)
    make(**options)  # options checked before SB3 is imported or anything compiles
    venv = vec_env_class()(n_envs, render_mode=render_mode, **options)
    if seed is not None:
        venv.seed(seed)
    if monitor:
        from stable_baselines3.common.vec_env import VecMonitor

        venv = VecMonitor(venv)
    return venv


def __getattr__(name: str):
    # ``GateSB3VecEnv`` is built (and SB3 imported) when first asked for, e.g. by isinstance checks
    # or unpickling
    if name == "GateSB3VecEnv":
        return vec_env_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
