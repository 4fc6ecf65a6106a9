"""JaxMARL environment of the multi-actuator gate (optional extra ``pip install "quantgate-env[jaxmarl]"``).

A real subclass of JaxMARL's ``MultiAgentEnv``, a thin shell over ``quantgate_env.mdp.multi_line`` (one agent
per control line, coupler, q0, q1, all steering one gate; no physics, reward, mask or cost logic here):

    env = quantgate_env.jaxmarl.make(**options)           # options of quantgate_env.make_multi
    env = quantgate_env.jaxmarl.make(line_id_in_obs=True) # + one-hot line id per observation
    obs, state = env.reset(key)
    obs, state, rewards, dones, infos = env.step(key, state, actions)
    env.get_avail_actions(state)                          # discrete mode: the core's masks

With the default ``precision="float64"`` trace and run under ``jax.enable_x64(True)`` (the core
raises otherwise); ``precision="float32"`` traces in a float32 program, no x64 needed.

* Observations: float32 (24 + K + 1,) per agent as the core's (layout in ``quantgate_env.mdp.multi_line``).
  The three lines see the same gate, so without their own amplitudes the observations would be
  almost alike; with ``line_id_in_obs=True`` a one-hot line id (n_agents,) in agent order is
  appended, so one shared-parameter policy (JaxMARL's IPPO default) can tell the lines apart.
* Rewards: the core's team reward for every agent, float32.
* Dones: every agent and ``"__all__"`` end together: the pulse ended, or (``oob_mode="terminate"``)
  a line left its bound, or ``max_steps`` steps were played. ``infos["terminated"]`` and
  ``infos["truncated"]`` keep the distinction (bootstrap on truncated if you wish).
* Infos: flat, every leaf of shape (n_agents,) in agent order (JaxMARL's baselines reshape them to
  one entry per actor): JT, concurrence, unitarity, tv_penalty, oob, t, leakage_increase, excess,
  cost, terminated, truncated and, in discrete mode, masked_action. Per-sample amplitudes are in
  ``state.core.amps`` (n_agents, K); masks come from ``get_avail_actions``.
* Auto-reset: ``step`` restarts a finished episode at once (JaxMARL's convention), with a fresh
  device drawn with the step's key (``resample_drift=True``) or the same device (fixed drift),
  exactly as ``MultiGateEnv.step_autoreset`` with the same key. ``step_env`` (no reset) on a
  finished state simulates nothing: the core returns it frozen (same state and observations,
  reward 0, dones kept), so a stale state is never played past the end of the pulse.
* Discrete mode: actions are level indices, () int for K = 1 (``Discrete(n_levels)``), else (K,)
  (``MultiDiscrete``). Masks are *not* enforced inside jit: a masked action is played as proposed
  and flagged in ``infos["masked_action"]``; sample with ``get_avail_actions`` to stay in bounds.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

try:
    from flax import struct
    from jaxmarl.environments import spaces
    from jaxmarl.environments.multi_agent_env import MultiAgentEnv, State
except ImportError as error:  # the optional extra is not installed
    raise ImportError(
        f"quantgate_env.jaxmarl needs jaxmarl ({error}); install the extra: pip install \"quantgate-env[jaxmarl]\""
    ) from error

from ..mdp import multi_line as _multi
from ..mdp.core import EnvParams
from ..validation import check_action_dict, instance_of
from ._jax_stacks import select_where

__all__ = ["GateMARLEnv", "GateMARLState", "make"]

# Core info entries that are not one scalar per agent (JaxMARL's infos are (n_agents,) leaves).
_NOT_SCALAR_INFO = ("amps", "action_mask")


@struct.dataclass
class GateMARLState(State):
    """JaxMARL state: the core state and JaxMARL's episode bookkeeping.

    The observations are the core's of ``core`` (``MultiGateEnv.observe``), and the episode-end
    flags are the core's (``core.terminated``, ``core.truncated``; ``max_steps`` marks the core
    state truncated), so nothing is stored twice.

    Attributes:
        done: () bool, the last step ended the episode (JaxMARL's field).
        step: () int32 steps since the reset (JaxMARL's field).
        core: the core's ``MultiGateState``.
    """

    core: Any


class GateMARLEnv(MultiAgentEnv):
    """The multi-actuator gate as a JaxMARL ``MultiAgentEnv`` (build with ``make(**options)``).

    Args:
        core: the functional ``MultiGateEnv`` (``quantgate_env.make_multi(...)``).
        params: the core's ``EnvParams`` for every reset (default: ``core.default_params``;
            ``core.eval_params`` for the nominal device without drift).
        line_id_in_obs: append a one-hot line id (n_agents,) to each agent's observation.
        max_steps: optional time limit in steps (ends the episode as truncated); default the
            pulse's own episode length.
    """

    def __init__(self, core: _multi.MultiGateEnv, params: EnvParams | None = None, *,
                 line_id_in_obs: bool = False, max_steps: int | None = None):
        instance_of("core", core, _multi.MultiGateEnv, "quantgate_env.MultiGateEnv (quantgate_env.make_multi(...))")
        if not isinstance(line_id_in_obs, bool):
            raise ValueError(f"line_id_in_obs: expected True or False, got {line_id_in_obs!r}")
        params = core.default_params if params is None else params
        instance_of("params", params, EnvParams, "quantgate_env.EnvParams (e.g. core.default_params)")
        if max_steps is None:
            max_steps = core.max_episode_steps
        elif isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps: expected a positive integer, got {max_steps!r}")
        super().__init__(num_agents=len(core.agents))
        self.core = core
        self.params = params
        self.line_id_in_obs = line_id_in_obs
        self.max_steps = max_steps
        self.agents = list(core.agents)
        self._discrete = core.config.action_mode == "discrete"
        self._k = core.config.env.n_time_steps
        obs_dim = core.config.env.obs_dim + (self.num_agents if line_id_in_obs else 0)
        scale = core.config.env.obs_scale
        high = max(scale, 1.0) if line_id_in_obs else scale  # one-hot entries are 0 or 1
        self.observation_spaces = {a: spaces.Box(-scale, high, (obs_dim,), jnp.float32) for a in self.agents}
        self.action_spaces = {a: self._make_action_space() for a in self.agents}

    # ---- JaxMARL description -----------------------------------------------------------------

    @property
    def name(self) -> str:
        """The environment's name, ``"ZCQPEE-MARL-v0"``."""
        return "ZCQPEE-MARL-v0"

    @property
    def agent_classes(self) -> dict:
        """{"coupler": [...], "qubit": [...]}: the line kinds present (qubit lines share a kind)."""
        classes = {"coupler": [a for a in self.agents if a == "coupler"], "qubit": [a for a in self.agents if a != "coupler"]}
        return {kind: agents for kind, agents in classes.items() if agents}

    def _make_action_space(self) -> spaces.Space:
        cfg = self.core.config
        if not self._discrete:
            return spaces.Box(-1.0, 1.0, (self._k,), jnp.float32)
        if self._k == 1:
            return spaces.Discrete(cfg.n_levels)
        return spaces.MultiDiscrete([cfg.n_levels] * self._k)

    # ---- pure functions ----------------------------------------------------------------------

    @partial(jax.jit, static_argnums=(0,))
    def reset(self, key: jax.Array) -> tuple[dict, GateMARLState]:
        """Start an episode on a device drawn from ``self.params``.

        Returns:
            obs {agent: (obs_dim,) float32} and the state.
        """
        return self._start(*self.core.reset(key, self.params))

    @partial(jax.jit, static_argnums=(0,))
    def step(self, key: jax.Array, state: GateMARLState, actions: dict, reset_state: GateMARLState | None = None):
        """One step for all agents, with auto-reset (module docstring).

        Args:
            key: PRNG key; it also draws the next episode's device when this one ends.
            state: current state.
            actions: {agent: action}, every agent: continuous (K,) deltas in [-1, 1]; discrete
                () (K = 1) or (K,) level indices.
            reset_state: optional state to restart from when the episode ends (JaxMARL's option).

        Returns:
            obs, state, rewards {agent: () float32}, dones {agent, "__all__": () bool}, infos.
        """
        obs_st, state_st, rewards, dones, infos = self.step_env(key, state, actions)
        if reset_state is None:
            reset_state = self._start(*self.core.next_episode(key, state_st.core, self.params))[1]
        done = dones["__all__"]
        state = select_where(done, reset_state, state_st)
        obs = select_where(done, self.get_obs(reset_state), obs_st)
        return obs, state, rewards, dones, infos

    def step_env(self, key: jax.Array, state: GateMARLState, actions: dict):
        """One step without reset: JaxMARL's five values (see ``step``)."""
        instance_of("state", state, GateMARLState, "quantgate_env.jaxmarl.GateMARLState (from env.reset)")
        shape = () if (self._discrete and self._k == 1) else (self._k,)
        check_action_dict(actions, tuple(self.agents), shape, integer=self._discrete)
        _, core_state, rewards, terminated, truncated, infos = self.core.step(
            key, state.core, {a: actions[a] for a in self.agents}, self.params)
        first = self.agents[0]  # team values: every agent has the same
        step = state.step + jnp.where(state.done, 0, 1).astype(state.step.dtype)  # a frozen state stays
        terminated = terminated[first]
        truncated = truncated[first] | ((step >= self.max_steps) & ~terminated)
        done = terminated | truncated
        # the time limit marks the core state truncated, so the core freezes it like its own ends
        state = GateMARLState(done=done, step=step, core=core_state._replace(truncated=truncated))
        reward = rewards[first].astype(jnp.float32)
        flat = {key: jnp.stack([infos[a][key] for a in self.agents])
                for key in infos[first] if key not in _NOT_SCALAR_INFO}
        flat["terminated"] = jnp.full((self.num_agents,), terminated)
        flat["truncated"] = jnp.full((self.num_agents,), truncated)
        dones = {**dict.fromkeys(self.agents, done), "__all__": done}
        return self.get_obs(state), state, dict.fromkeys(self.agents, reward), dones, flat

    def get_obs(self, state: GateMARLState) -> dict:
        """{agent: (obs_dim,) float32}: the core's observation (+ the one-hot line id)."""
        core_obs = self.core.observe(state.core)
        obs = {}
        for i, agent in enumerate(self.agents):
            o = core_obs[agent].astype(jnp.float32)
            if self.line_id_in_obs:
                o = jnp.concatenate([o, jax.nn.one_hot(i, self.num_agents, dtype=jnp.float32)])
            obs[agent] = o
        return obs

    @partial(jax.jit, static_argnums=(0,))
    def get_avail_actions(self, state: GateMARLState) -> dict:
        """Discrete mode: {agent: bool mask}, (n_levels,) for K = 1, else (K, n_levels) per sample.

        Any action drawn component-wise from its mask stays within the line's bound (the core's
        rule, ``quantgate_env.mdp.multi_line``). Continuous mode has no masks and raises a ValueError.
        """
        if not self._discrete:
            raise ValueError('get_avail_actions: action masks exist only with action_mode="discrete"; got action_mode="continuous"')
        masks = self.core.action_masks(state.core)
        return {a: (masks[a][0] if self._k == 1 else masks[a]) for a in self.agents}

    # ---- helpers -----------------------------------------------------------------------------

    def _start(self, core_obs, core_state) -> tuple[dict, GateMARLState]:
        del core_obs  # get_obs observes the core state itself
        state = GateMARLState(done=jnp.zeros((), bool), step=jnp.zeros((), jnp.int32), core=core_state)
        return self.get_obs(state), state


def make(*, params: EnvParams | None = None, line_id_in_obs: bool = False, max_steps: int | None = None,
         **options) -> GateMARLEnv:
    """The JaxMARL environment; ``options`` as ``quantgate_env.make_multi`` (passed through).

    Args:
        params: the core's ``EnvParams`` for every reset (default: the core's ``default_params``).
        line_id_in_obs: append a one-hot line id to each agent's observation.
        max_steps: optional time limit in steps (default: the pulse's episode length).
        **options: ``MultiGateConfig`` and ``EnvConfig`` fields (actuators, action_mode, n_levels,
            pulse_length, oob_mode, drift, ...).
    """
    return GateMARLEnv(_multi.make_multi(**options), params, line_id_in_obs=line_id_in_obs, max_steps=max_steps)
