"""Multi-actuator gate environment as pure functions over agent-keyed pytrees.

This is the functional core behind ``quantgate_env.pettingzoo``.

One agent per control line, all steering one gate (cooperative, one device, one pulse):

* ``coupler``: u_c b^dag b, the paper's control (bound ``a_norm_max * a_scale`` = 20 rad/ns);
* ``q0``, ``q1``: qubit frequency shifts u_j a_j^dag a_j (bound ``q0_amp_bound``/``q1_amp_bound``,
  default ``QUBIT_AMP_BOUND`` = 2 pi x 0.3 GHz ~ 1.885 rad/ns, see there).

All lines are number operators, so the excitation sectors and the exact propagation still hold
(``propagation.propagate_samples_lines``); a qubit shift leaves |000> at energy 0 and only adds
local phases, so the gate metrics keep their meaning. With ``actuators=("coupler",)`` this is
exactly the single-agent ``GateEnv`` (same observation, reward, flags; tested).

A view of the one core (``quantgate_env.mdp.core.GateCore``, which ``GateEnv`` views with the coupler
alone): this module converts agent-keyed dicts to the core's per-line arrays and back.

Step semantics (all agents act at once; float64/complex128 under x64 by default, or float32 with
``precision="float32"``):

* each agent's action sets the K samples of its own line, exactly as the single-agent action sets
  the coupler: continuous deltas in [-1, 1] x its ``delta`` (rad/ns per unit action; the coupler
  keeps ``delta_per_action``, a qubit line gets it scaled by bound_line / coupler bound, so one
  unit of action means the same fraction of every line's range), or, in discrete mode, one of
  ``n_levels`` levels linspace(-1, 1, n_levels) x delta per sample;
* u_k = u_last + cumulative deltas; amplitudes beyond a line's bound are clipped and the
  normalised excess sum_k max(|u_k|/B_line - 1, 0) is that agent's excess;
* team reward = the single-agent gate reward (``core.segment_reward``) with the TV penalty summed
  over lines and the excess summed over lines; every agent gets it. Out of bounds on any line
  truncates everyone in ``oob_mode="terminate"``; all agents end together.

Per-agent observation (``obs_dim = 24 + K + 1``, all x ``obs_scale``): entries 0..23 the shared
gate features (as ``observation_layout``), 24..24+K-1 the agent's **own** line amplitudes
u_k / B_line, last the shared time feature. For the coupler this is the single-agent observation.

Safety cost (``info[agent]["cost"]``, every step):

    cost_i = excess_i + (L_after - L_before),    L = 1 - unitarity (leakage out of the
                                                  computational subspace, spec 2.1)

excess_i is agent i's own normalised out-of-bounds excess (0 inside the bound); the leakage change
is a property of the shared device, so every agent carries all of it (no agent can be blamed
alone for a joint effect; each agent's constraint is the device's constraint). The leakage term is
signed on purpose: over an episode it telescopes, so the episodic cost is
sum_t excess_i,t + L_final, a budget on the leakage the gate finally has (transient population of
the coupler is how the gate works and is not penalised once it returns). Both parts are in the
info (``excess``, ``leakage_increase``).

Discrete action masks (``info[agent]["action_mask"]``, (K, n_levels) bool, sound by
construction): the masks of the K samples are built in sample order. After sample k the set of
amplitudes reachable by mask-allowed choices is an interval [lo_k, hi_k] (lo_0 = hi_0 = u_last);
a level d is allowed for sample k+1 iff lo_k + d >= -B and hi_k + d <= B, i.e. iff it stays in
bounds *whatever* allowed levels the earlier samples take; then lo, hi extend by the smallest and
largest allowed level. Any action whose every component is taken from its mask therefore stays
in bounds (the environment accumulates discrete samples with the same floating-point additions as
the mask, rounding is monotone, and ``core.normalised_excess`` is exactly 0 up to the bound, so this
holds to the last bit). Level 0 is always allowed
(n_levels is odd), so no mask is empty. The rule is conservative: an early sample may use the
whole headroom, so later samples are restricted as if it had.
"""

from __future__ import annotations

import dataclasses

import gymnasium
import jax
import jax.numpy as jnp

from ..physics.propagation import TaylorPlan
from ..validation import check_action_dict, check_action_shape, instance_of
from .config import ACTION_MODES, QUBIT_AMP_BOUND, MultiGateConfig
from .core import CoreState, EnvParams
from .evaluation import MultiGateEvaluation
from .single_line import GateEnv
from .view import CoreView

__all__ = [
    "ACTION_MODES",
    "QUBIT_AMP_BOUND",
    "MultiGateConfig",
    "MultiGateState",
    "MultiGateEnv",
    "make_multi",
]

#: The state of ``MultiGateEnv``: the core's state (``amps`` (n_agents, K), rows in agent order).
MultiGateState = CoreState

# Core info entries that differ per line (the rest is one gate's, the same for every agent).
_PER_LINE = ("amps", "excess", "cost", "action_mask", "masked_action", "final_obs")


@dataclasses.dataclass(frozen=True)
class MultiGateEnv(CoreView):
    """The multi-actuator gate environment (functional core; hashable, a static jit argument).

    Pure functions, jit- and vmap-able (agent-keyed dicts in and out):

        reset(key, params)                  -> obs, state
        step(key, state, actions, params)   -> obs, state, rewards, terminated, truncated, infos
        step_autoreset(key, state, actions, params)   (infos[agent]["final_obs"] as GateEnv)
        next_episode(key, state, params)    -> obs, state   (the episode after state's)
        observe(state)                      -> obs
        action_masks(state)                 -> {agent: (K, n_levels) bool}   (discrete mode)
        reset_info(state)                   -> infos with the structure of ``step``'s

    ``params`` is the single-agent ``EnvParams`` (device + drift), shared by all agents. A step on
    a finished episode is frozen as in ``GateEnv`` (``core`` module docstring).

    Attributes:
        config: static configuration.
        plan: Taylor plan covering every line's bound and the drift (derived; do not pass).
    """

    config: MultiGateConfig = MultiGateConfig()
    plan: TaylorPlan | None = None

    def __post_init__(self):
        instance_of("config", self.config, MultiGateConfig, "quantgate_env.MultiGateConfig")
        if self.plan is None:
            object.__setattr__(self, "plan", self.core.plan)

    @property
    def _lines_config(self) -> MultiGateConfig:
        return self.config

    def _view(self, rows) -> dict:
        return self._per_agent(rows)

    # ---- static description -------------------------------------------------------------

    @property
    def agents(self) -> tuple[str, ...]:
        """Agent names (= control lines), in order."""
        return self.config.actuators

    @property
    def gate(self) -> GateEnv:
        """The single-agent environment sharing this one's pulse, reward and drift configuration."""
        return GateEnv(self.config.env, self.plan)

    @property
    def evaluation(self):
        """What an agent records and prints of an evaluation episode (docs/contracts.md)."""
        return MultiGateEvaluation(self.agents)

    def observation_space(self, agent: str) -> gymnasium.spaces.Box:
        """Box (24 + K + 1,) in [-obs_scale, obs_scale] (layout in the module docstring)."""
        self._check_agent(agent)
        return self.gate.observation_space

    def action_space(self, agent: str) -> gymnasium.spaces.Space:
        """Box (K,) in [-1, 1]; discrete: MultiDiscrete([n_levels] * K), or Discrete(n_levels) if K = 1."""
        self._check_agent(agent)
        cfg = self.config
        k = cfg.env.n_time_steps
        if cfg.action_mode == "continuous":
            return self.gate.action_space
        if k == 1:
            return gymnasium.spaces.Discrete(cfg.n_levels)
        return gymnasium.spaces.MultiDiscrete([cfg.n_levels] * k)

    def _check_agent(self, agent) -> None:
        if agent not in self.agents:
            raise ValueError(f"agent: expected one of {self.agents}, got {agent!r}")

    # ---- pure functions (reset, reset_to, next_episode, observe: ``view.CoreView``) --------

    def action_masks(self, state: MultiGateState) -> dict:
        """Discrete-mode masks {agent: (K, n_levels) bool} for the next step.

        The rule is in the module docstring: any action drawn component-wise from its mask stays
        within the bound.
        """
        return self._per_agent(self.core.action_masks(state))

    def reset_info(self, state: MultiGateState) -> dict:
        """Infos of a freshly reset state, with the structure ``step`` returns.

        The step quantities are zeros, so a scan can carry them.
        """
        return self._infos(self.core.reset_info(state))

    def step(self, key: jax.Array, state: MultiGateState, actions: dict, params: EnvParams):
        """Play one segment of K samples on every line at once.

        Args:
            key: unused (kept for the contract).
            state: current state (a finished one is returned frozen).
            actions: {agent: action} for every agent. Continuous: (K,) deltas in units of the
                line's ``delta`` (clipped to [-1, 1] like GateEnv). Discrete: (K,) (or () if
                K = 1) integer level indices in [0, n_levels) (masks are *not* enforced here:
                a masked action is played as proposed and flagged in ``masked_action``).
            params: environment parameters (the device in use is ``state.device``).

        Returns:
            obs {agent: (obs_dim,)}, state, rewards {agent: ()} (the team reward),
            terminated {agent: () bool}, truncated {agent: () bool}, infos {agent: dict} with
            JT, concurrence, unitarity, tv_penalty, oob, t (shared), amps (K,) rad/ns, excess,
            leakage_increase, cost (own), and in discrete mode action_mask (K, n_levels) for
            the next step and masked_action () bool.
        """
        out = self.core.step(key, state, self._rows(actions), params, "MultiGateEnv.step")
        return self._outputs(*out)

    def step_autoreset(self, key: jax.Array, state: MultiGateState, actions: dict, params: EnvParams):
        """``step``, then restart a finished episode in place (all agents end together).

        As ``GateEnv.step_autoreset``: a new device (resample drift) or the same one (fixed
        drift); ``infos[agent]["final_obs"]`` is the finished episode's last observation, and
        ``action_mask`` describes the state returned (the reset one where done).
        """
        out = self.core.step_autoreset(key, state, self._rows(actions), params, "MultiGateEnv.step_autoreset")
        return self._outputs(*out)

    # ---- dicts <-> the core's per-line arrays ---------------------------------------------

    def _rows(self, actions: dict) -> list:
        """Actions in agent order, each (K,), after the trace-time checks (``validation``)."""
        k = self.config.env.n_time_steps
        discrete = self.config.action_mode == "discrete"
        check_action_dict(actions, self.agents, None, discrete)
        rows = []
        for agent in self.agents:
            a = actions[agent]
            shape = () if (discrete and k == 1 and jnp.ndim(a) == 0) else (k,)
            check_action_shape(f"actions[{agent!r}]", a, shape, discrete)
            rows.append(jnp.reshape(a, (k,)))
        return rows

    def _per_agent(self, rows) -> dict:
        return {a: rows[i] for i, a in enumerate(self.agents)}

    def _infos(self, info: dict) -> dict:
        return {agent: {key: (value[i] if key in _PER_LINE else value) for key, value in info.items()}
                for i, agent in enumerate(self.agents)}

    def _outputs(self, obs, state, reward, terminated, truncated, info):
        team = lambda x: dict.fromkeys(self.agents, x)  # noqa: E731 (one value for every agent)
        return self._per_agent(obs), state, team(reward), team(terminated), team(truncated), self._infos(info)


def make_multi(**options) -> MultiGateEnv:
    """Build the functional multi-actuator environment from keyword options.

    Accepts ``MultiGateConfig`` fields (actuators, q0_amp_bound, q1_amp_bound, action_mode,
    n_levels) and ``EnvConfig`` fields (pulse_length, oob_mode, precision, ...); the PettingZoo
    adapter's own options (mask_in_obs, masked_action) go to ``pettingzoo.parallel_env``.
    ``make_multi(actuators=("coupler",))`` is the single-agent paper MDP with agent-keyed dicts.
    """
    return MultiGateEnv(MultiGateConfig.from_options(**options))
