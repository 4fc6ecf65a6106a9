"""gymnax environments of the gate (optional extra ``pip install "quantgate-env[gymnax]"``).

Real subclasses of gymnax 1.0's ``Environment``, thin shells over the functional core (no physics,
reward or flag logic here):

    env = quantgate_env.gymnax.make(**options)          # one policy, the coupler line (the paper)
    env = quantgate_env.gymnax.make_multi(**options)    # one policy, every line (coupler, q0, q1)
    params = env.default_params                         # GymnaxParams(core, max_steps_in_episode)
    obs, state = env.reset(key, params)
    obs, state, reward, terminated, truncated, info = env.step(key, state, action, params)

Options are those of ``quantgate_env.make`` / ``make_multi``, passed through unchanged. With the
default ``precision="float64"`` trace and run under ``jax.enable_x64(True)`` (the core raises
otherwise); ``precision="float32"`` traces in a float32 program, no x64 needed.

Flags. ``terminated``: the pulse ended (a natural end: do not bootstrap). ``truncated``: the core
truncated (a line left its bound in ``oob_mode="terminate"``) or ``max_steps_in_episode`` steps
were played before the pulse ended (bootstrap from ``info["final_observation"]`` if you treat
these as time limits). gymnax's ``done`` is ``terminated | truncated``; ``info`` keeps both.

Auto-reset. ``step`` restarts a finished episode at once (as every gymnax environment does): the
returned ``obs``/``state`` belong to the new episode, ``info["final_observation"]`` is the finished
one's last observation. The new device is drawn with the step's key (``resample_drift=True``) or
is the finished episode's device (fixed drift), exactly as ``GateEnv.step_autoreset``; with the
default ``max_steps_in_episode`` the outputs equal ``GateEnv.step_autoreset`` with the same key
(observation and reward cast to float32). ``step_env`` (no reset) on a finished state simulates
nothing: the core returns the state frozen (same state and observation, reward 0, flags kept), so
a stale state is never played past the end of the pulse.

Observations are float32 (``observation_space``), rewards float32, info entries as the core
returns them (float64 metrics). Old clients of the five-value step (rejax 0.1.3) take
``LegacyStepView(env)``.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

try:
    from flax import struct
    from gymnax.environments import environment, spaces
except ImportError as error:  # the optional extra is not installed
    raise ImportError(
        f"quantgate_env.gymnax needs gymnax ({error}); install the extra: pip install \"quantgate-env[gymnax]\""
    ) from error

from ..mdp import multi_line as _multi
from ..mdp import single_line as _single
from ..validation import check_action_shape, instance_of
from ._jax_stacks import check_params, select_where

__all__ = [
    "GateGymnaxEnv",
    "GymnaxParams",
    "GymnaxState",
    "LegacyStepView",
    "MultiLineGymnaxEnv",
    "make",
    "make_multi",
]

# The public module that exports this one's names (error messages name it).
_HOME = "quantgate_env.gymnax"

# Entries of the multi-actuator core's infos that differ per line (the rest is shared by all lines).
_PER_LINE_INFO = ("amps", "excess", "cost")


@struct.dataclass
class GymnaxParams:
    """Environment parameters in gymnax's form (a pytree; ``params.replace(...)`` works).

    Attributes:
        core: the core's ``EnvParams`` (device and drift half-widths; vmap over it for many
            devices).
        max_steps_in_episode: gymnax's time limit, steps. Default: the pulse's own episode length
            (333 for the paper), so only the core ends episodes; a smaller value truncates.
    """

    core: _single.EnvParams
    max_steps_in_episode: int


@struct.dataclass
class GymnaxState(environment.EnvState):
    """gymnax state: the core's state plus the time-limit counter and the episode-end flags.

    Attributes:
        time: () int32 steps since the reset (gymnax's counter).
        core: the core state (``EnvState`` or ``MultiGateState``).
        terminated: () bool, the last step ended the pulse.
        truncated: () bool, the last step truncated (out of bounds, or the time limit).
    """

    core: Any
    terminated: jax.Array
    truncated: jax.Array


class _GateGymnax(environment.Environment):
    """The gymnax plumbing shared by the single- and the multi-line environment.

    Subclasses are frozen dataclasses with a ``core`` field and define ``_core_action`` (gymnax
    action -> core action) and ``_from_core`` (core outputs -> flat gymnax outputs).
    """

    core: Any

    # ---- gymnax description ------------------------------------------------------------------

    @property
    def default_params(self) -> GymnaxParams:
        """Training parameters: the core's ``default_params``, time limit = the pulse's episode."""
        return GymnaxParams(core=self.core.default_params, max_steps_in_episode=self.core.max_episode_steps)

    @property
    def eval_params(self) -> GymnaxParams:
        """Evaluation parameters: the nominal device without drift (the core's ``eval_params``)."""
        return GymnaxParams(core=self.core.eval_params, max_steps_in_episode=self.core.max_episode_steps)

    @property
    def num_actions(self) -> int:
        """Dimension of the (continuous) action."""
        return self.action_space().shape[0]

    def observation_space(self, params: GymnaxParams | None = None) -> spaces.Box:
        """Box (obs_dim,) float32, every entry in [-obs_scale, obs_scale]."""
        scale = self._env_config.obs_scale
        return spaces.Box(-scale, scale, (self._obs_dim,), jnp.float32)

    def action_space(self, params: GymnaxParams | None = None) -> spaces.Box:
        """Box (action_dim,) float32 in [-1, 1]: amplitude deltas in units of each line's delta."""
        return spaces.Box(-1.0, 1.0, (self._action_dim,), jnp.float32)

    # ---- pure functions ----------------------------------------------------------------------

    @partial(jax.jit, static_argnames=("self",))
    def step(self, key: jax.Array, state: GymnaxState, action: jax.Array, params: GymnaxParams | None = None):
        """One step with auto-reset (module docstring): gymnax 1.0's six values.

        Args:
            key: PRNG key; it also draws the next episode's device when this one ends.
            state: current state.
            action: (action_dim,) deltas in [-1, 1] (values outside are clipped by the core).
            params: ``GymnaxParams`` (default ``default_params``).

        Returns:
            obs (obs_dim,) float32, state, reward () float32, terminated () bool, truncated () bool,
            info (the core's entries plus ``terminated``, ``truncated``, ``final_observation``).
        """
        params = self._checked(params)
        obs_st, state_st, reward, terminated, info = self.step_env(key, state, action, params)
        truncated = self.is_truncated(state_st, params)
        done = terminated | truncated
        core_obs, core_state = self.core.next_episode(key, state_st.core, params.core)
        state_re = GymnaxState(time=jnp.zeros((), jnp.int32), core=core_state,
                               terminated=jnp.zeros((), bool), truncated=jnp.zeros((), bool))
        state = select_where(done, state_re, state_st)
        obs = jnp.where(done, self._obs(core_obs), obs_st)
        info = {**info, "terminated": terminated, "truncated": truncated, "final_observation": obs_st}
        return obs, state, reward, terminated, truncated, info

    def reset_env(self, key: jax.Array, params: GymnaxParams) -> tuple[jax.Array, GymnaxState]:
        """Start an episode on a device drawn from ``params.core`` (the core's ``reset``)."""
        check_params(params, GymnaxParams, "params", _HOME)
        core_obs, core_state = self.core.reset(key, params.core)
        state = GymnaxState(time=jnp.zeros((), jnp.int32), core=core_state,
                            terminated=jnp.zeros((), bool), truncated=jnp.zeros((), bool))
        return self._obs(core_obs), state

    def step_env(self, key: jax.Array, state: GymnaxState, action: jax.Array, params: GymnaxParams):
        """One step without reset, gymnax 1.0's five values (``truncated``: ``is_truncated``).

        A state whose episode already ended is frozen by the core: the same state and
        observation, reward 0, the flags kept (nothing is simulated past the end of an episode).
        The time limit marks the core state truncated, so the core freezes it too.
        """
        check_params(params, GymnaxParams, "params", _HOME)
        check_action_shape("action", action, (self._action_dim,), integer=False)
        instance_of("state", state, GymnaxState, "quantgate_env.gymnax.GymnaxState (from env.reset)")
        obs, core_state, reward, terminated, truncated, info = self.core.step(
            key, state.core, self._core_action(action), params.core)
        obs, reward, terminated, truncated, info = self._from_core(obs, reward, terminated, truncated, info)
        time = state.time + jnp.where(state.terminated | state.truncated, 0, 1).astype(state.time.dtype)
        # A time limit reached on the pulse's last step is its natural end, not a truncation.
        truncated = truncated | ((time >= params.max_steps_in_episode) & ~terminated)
        core_state = core_state._replace(truncated=truncated)
        state = GymnaxState(time=time, core=core_state, terminated=terminated, truncated=truncated)
        return obs, state, reward, terminated, info

    def is_terminated(self, state: GymnaxState, params: GymnaxParams) -> jax.Array:
        """() bool: the last step ended the pulse."""
        return state.terminated

    def is_truncated(self, state: GymnaxState, params: GymnaxParams) -> jax.Array:
        """() bool: the last step truncated (out of bounds, or ``max_steps_in_episode``)."""
        return state.truncated

    # ---- helpers -----------------------------------------------------------------------------

    def _checked(self, params):
        params = self.default_params if params is None else params
        check_params(params, GymnaxParams, "params", _HOME)
        return params

    def _obs(self, core_obs) -> jax.Array:
        return self._from_core(core_obs, 0.0, False, False, None)[0]


@dataclasses.dataclass(frozen=True)
class GateGymnaxEnv(_GateGymnax):
    """The paper's single-line gate MDP as a gymnax environment (``make(**options)``).

    Observation (28,) float32 = the core's (``quantgate_env.observation_layout``); action (K,)
    coupler deltas; ``info``: JT, concurrence, unitarity, tv_penalty, oob, t, amps (K,) rad/ns,
    plus gymnax's terminated, truncated, final_observation.

    Attributes:
        core: the functional ``GateEnv`` (hashable, so this environment is a valid static
            argument of ``jax.jit``; copies compare equal).
    """

    core: _single.GateEnv = dataclasses.field(default_factory=_single.GateEnv)

    def __post_init__(self):
        instance_of("core", self.core, _single.GateEnv, "quantgate_env.GateEnv (quantgate_env.make(...))")

    @property
    def name(self) -> str:
        """The environment's name, ``"ZCQPEE-v0"`` (as registered with Gymnasium)."""
        return "ZCQPEE-v0"

    @property
    def _env_config(self):
        return self.core.config

    @property
    def _obs_dim(self) -> int:
        return self.core.config.obs_dim

    @property
    def _action_dim(self) -> int:
        return self.core.config.n_time_steps

    def _core_action(self, action):
        return action

    def _from_core(self, obs, reward, terminated, truncated, info):
        return obs.astype(jnp.float32), jnp.asarray(reward, jnp.float32), terminated, truncated, info


@dataclasses.dataclass(frozen=True)
class MultiLineGymnaxEnv(_GateGymnax):
    """Every control line under one policy, as a gymnax environment (``make_multi(**options)``).

    Observation (24 + n K + 1,) float32: the 24 shared gate features, then each line's own K
    amplitudes / its bound in agent order, then the time feature (with ``actuators=("coupler",)``
    exactly the single-line observation). Action (n K,): line i's K deltas are
    ``action[i K:(i + 1) K]``. Reward and flags are the core's team values. ``info``: the shared
    entries of the core (JT, concurrence, unitarity, tv_penalty, oob, t, leakage_increase), per
    line stacked in agent order ``amps`` (n, K), ``excess`` (n,), ``cost`` (n,), plus gymnax's.
    Continuous actions only (a joint discrete action has n_levels^(n K) values; for masked
    discrete levels use ``quantgate_env.jaxmarl``, one agent per line).

    Attributes:
        core: the functional ``MultiGateEnv``.
    """

    core: _multi.MultiGateEnv = dataclasses.field(default_factory=_multi.MultiGateEnv)

    def __post_init__(self):
        instance_of("core", self.core, _multi.MultiGateEnv, "quantgate_env.MultiGateEnv (quantgate_env.make_multi(...))")
        if self.core.config.action_mode != "continuous":
            raise ValueError(
                f'action_mode: the gymnax multi-line environment takes continuous actions only, got "{self.core.config.action_mode}"; '
                "for discrete levels with masks use quantgate_env.jaxmarl (one agent per line)")

    @property
    def name(self) -> str:
        """The environment's name, ``"ZCQPEE-MultiLine-v0"``."""
        return "ZCQPEE-MultiLine-v0"

    @property
    def _env_config(self):
        return self.core.config.env

    @property
    def _obs_dim(self) -> int:
        return 24 + len(self.core.agents) * self.core.config.env.n_time_steps + 1

    @property
    def _action_dim(self) -> int:
        return len(self.core.agents) * self.core.config.env.n_time_steps

    def _core_action(self, action):
        rows = jnp.reshape(action, (len(self.core.agents), self.core.config.env.n_time_steps))
        return {agent: rows[i] for i, agent in enumerate(self.core.agents)}

    def _from_core(self, obs, reward, terminated, truncated, info):
        agents, k = self.core.agents, self.core.config.env.n_time_steps
        first = agents[0]
        # each agent's observation is [24 shared | its own K amplitudes | time]
        joint = jnp.concatenate([obs[first][:24], *(obs[a][24:24 + k] for a in agents), obs[first][-1:]])
        pick = (lambda x: x[first]) if isinstance(reward, dict) else (lambda x: x)
        if info is not None:
            info = {key: (jnp.stack([info[a][key] for a in agents]) if key in _PER_LINE_INFO else value)
                    for key, value in info[first].items()}
        return (joint.astype(jnp.float32), jnp.asarray(pick(reward), jnp.float32), pick(terminated),
                pick(truncated), info)


@dataclasses.dataclass(frozen=True)
class LegacyStepView:
    """The five-value step of gymnax < 1.0 over a gymnax 1.0 environment, for old clients.

    ``step`` returns ``(obs, state, reward, done, info)`` with ``done = terminated | truncated``
    and the distinction kept in ``info["terminated"]``, ``info["truncated"]``,
    ``info["final_observation"]``; everything else is the wrapped environment's. rejax 0.1.3
    unpacks five values and deep-copies its configuration, so this view is a frozen dataclass:
    it survives ``copy.deepcopy`` (gymnax's own ``LegacyStepAPIWrapper`` recurses forever
    there), compares equal to its copies and is a valid static ``jax.jit`` argument.

    Attributes:
        env: the gymnax 1.0 environment (``GateGymnaxEnv`` or ``MultiLineGymnaxEnv``).
    """

    env: _GateGymnax

    def __post_init__(self):
        instance_of("env", self.env, _GateGymnax,
                    "a quantgate_env.gymnax environment (quantgate_env.gymnax.make(...))")

    def reset(self, key: jax.Array, params: GymnaxParams | None = None):
        """The wrapped ``reset``: (obs, state)."""
        return self.env.reset(key, params)

    def step(self, key: jax.Array, state: GymnaxState, action: jax.Array, params: GymnaxParams | None = None):
        """The wrapped auto-resetting ``step`` as (obs, state, reward, done, info)."""
        obs, state, reward, terminated, truncated, info = self.env.step(key, state, action, params)
        return obs, state, reward, terminated | truncated, info

    @property
    def default_params(self) -> GymnaxParams:
        """The wrapped environment's training parameters."""
        return self.env.default_params

    @property
    def eval_params(self) -> GymnaxParams:
        """The wrapped environment's evaluation parameters (nominal device, no drift)."""
        return self.env.eval_params

    @property
    def name(self) -> str:
        """The wrapped environment's name."""
        return self.env.name

    @property
    def num_actions(self) -> int:
        """Dimension of the wrapped environment's (continuous) action."""
        return self.env.num_actions

    def observation_space(self, params: GymnaxParams | None = None) -> spaces.Box:
        """The wrapped ``observation_space``: Box (obs_dim,) float32 in [-obs_scale, obs_scale]."""
        return self.env.observation_space(params)

    def action_space(self, params: GymnaxParams | None = None) -> spaces.Box:
        """The wrapped ``action_space``: Box (action_dim,) float32 in [-1, 1]."""
        return self.env.action_space(params)


def make(**options) -> GateGymnaxEnv:
    """The single-line (coupler) gymnax environment; options as ``quantgate_env.make``."""
    return GateGymnaxEnv(_single.make(**options))


def make_multi(**options) -> MultiLineGymnaxEnv:
    """All control lines under one policy; options as ``quantgate_env.make_multi`` (continuous)."""
    return MultiLineGymnaxEnv(_multi.make_multi(**options))
