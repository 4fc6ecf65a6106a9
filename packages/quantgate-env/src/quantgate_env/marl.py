"""Multi-actuator gate environment as pure functions over agent-keyed pytrees (the functional core
behind ``quantgate_env.pettingzoo``).

One agent per control line, all steering one gate (cooperative, one device, one pulse):

* ``coupler``: u_c b^dag b, the paper's control (bound ``a_norm_max * a_scale`` = 20 rad/ns);
* ``q0``, ``q1``: qubit frequency shifts u_j a_j^dag a_j (bound ``q0_amp_bound``/``q1_amp_bound``,
  default ``QUBIT_AMP_BOUND`` = 2 pi x 0.3 GHz ~ 1.885 rad/ns, see there).

All lines are number operators, so the excitation sectors and the exact propagation still hold
(``propagation.propagate_samples_lines``); a qubit shift leaves |000> at energy 0 and only adds
local phases, so the gate metrics keep their meaning. With ``actuators=("coupler",)`` this is
exactly the single-agent ``GateEnv`` (same observation, reward, flags; tested).

Step semantics (all agents act at once; every array is float64/complex128, trace under x64):

* each agent's action sets the K samples of its own line, exactly as the single-agent action sets
  the coupler: continuous deltas in [-1, 1] x its ``delta`` (rad/ns per unit action; the coupler
  keeps ``delta_per_action``, a qubit line gets it scaled by bound_line / coupler bound, so one
  unit of action means the same fraction of every line's range), or, in discrete mode, one of
  ``n_levels`` levels linspace(-1, 1, n_levels) x delta per sample;
* u_k = u_last + cumulative deltas; amplitudes beyond a line's bound are clipped and the
  normalised excess sum_k max(|u_k|/B_line - 1, 0) is that agent's excess;
* team reward = the single-agent gate reward (``env.segment_reward``) with the TV penalty summed
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
the mask, rounding is monotone, and ``env.normalised_excess`` is exactly 0 up to the bound, so this
holds to the last bit). Level 0 is always allowed
(n_levels is odd), so no mask is empty. The rule is conservative: an early sample may use the
whole headroom, so later samples are restricted as if it had.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from .config import EnvConfig
from .device import DeviceParams, nominal_device
from .env import EnvParams, GateEnv, normalised_excess, plan_for, segment_reward
from .evaluation import MultiGateEvaluation
from .hamiltonian import CONTROL_LINES, SectorDrift, line_diagonals
from .metrics import state_metrics
from .precision import require_x64
from .propagation import SectorState, TaylorPlan, initial_sector_state, propagate_samples_lines, theta_bound_lines
from .validation import choice, finite_number

__all__ = [
    "ACTION_MODES",
    "QUBIT_AMP_BOUND",
    "MultiGateConfig",
    "MultiGateState",
    "MultiGateEnv",
    "make_multi",
]

ACTION_MODES = ("continuous", "discrete")
MASKED_ACTION_MODES = ("raise", "execute")

#: Default qubit-line amplitude bound, rad/ns: 2 pi x 0.3 GHz. Flux-tuned transmons in
#: Sycamore-class chips make excursions of a few hundred MHz during two-qubit gates; going further
#: costs dephasing (flux-noise sensitivity grows away from the sweet spot) and flux-line
#: bandwidth. With +-0.3 GHz on each qubit the qubit-qubit detuning (0.8588 GHz) stays above
#: 0.2588 GHz > |alpha_q1| = 0.235 GHz, so the qubit lines alone cannot cross the |11>-|02>
#: resonance: the coupler remains the gate's engine, the qubit lines trim phases and detunings.
QUBIT_AMP_BOUND = 2.0 * math.pi * 0.3


@dataclasses.dataclass(frozen=True)
class MultiGateConfig:
    """Static configuration of the multi-actuator environment (frozen, hashable).

    Attributes:
        env: the single-agent configuration (pulse, reward shaping, drift, oob mode); the coupler
            line uses its ``a_scale``/``a_norm_max``/``delta_scale``.
        actuators: agents, one per control line, a non-empty tuple of distinct names from
            ``("coupler", "q0", "q1")`` (agent order = this order).
        q0_amp_bound, q1_amp_bound: |u_j| bounds of the qubit lines, rad/ns (``QUBIT_AMP_BOUND``).
        action_mode: "continuous" (Box deltas in [-1, 1]^K) or "discrete" (K level indices).
        n_levels: number of delta levels in discrete mode, odd >= 3 (level 0 = hold).
        mask_in_obs: (ParallelEnv) observations become {"observation", "action_mask"} dicts.
        masked_action: (ParallelEnv) "raise" (default: a masked discrete action is an error,
            never rewritten) or "execute" (play it as proposed; the oob mode then applies and
            ``info[agent]["masked_action"]`` flags it), for tests that sample without masks.
    """

    env: EnvConfig = EnvConfig()
    actuators: tuple[str, ...] = CONTROL_LINES
    q0_amp_bound: float = QUBIT_AMP_BOUND
    q1_amp_bound: float = QUBIT_AMP_BOUND
    action_mode: str = "continuous"
    n_levels: int = 5
    mask_in_obs: bool = False
    masked_action: str = "raise"

    def __post_init__(self):
        if not isinstance(self.env, EnvConfig):
            raise ValueError(f"env: expected quantgate_env.EnvConfig, got {type(self.env).__name__}")
        actuators = self.actuators
        if isinstance(actuators, str) or not isinstance(actuators, (tuple, list)) or not actuators:
            raise ValueError(f"actuators: expected a non-empty tuple of names from {CONTROL_LINES}, got {actuators!r}")
        for name in actuators:
            choice("actuators", name, CONTROL_LINES)
        if len(set(actuators)) != len(actuators):
            raise ValueError(f"actuators: expected distinct names, got {tuple(actuators)!r}")
        object.__setattr__(self, "actuators", tuple(actuators))
        for name in ("q0_amp_bound", "q1_amp_bound"):
            value = finite_number(name, getattr(self, name))
            if value <= 0:
                raise ValueError(f"{name}: expected a positive bound in rad/ns, got {value!r}")
            object.__setattr__(self, name, value)
        choice("action_mode", self.action_mode, ACTION_MODES)
        choice("masked_action", self.masked_action, MASKED_ACTION_MODES)
        n = self.n_levels
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 3 or n % 2 == 0:
            raise ValueError(
                f"n_levels: expected an odd integer >= 3 (so that level 0, hold, exists and no mask is empty), got {n!r}"
            )
        object.__setattr__(self, "n_levels", int(n))
        if not isinstance(self.mask_in_obs, bool):
            raise ValueError(f"mask_in_obs: expected True or False, got {self.mask_in_obs!r}")
        if self.mask_in_obs and self.action_mode != "discrete":
            raise ValueError('mask_in_obs: action masks exist only with action_mode="discrete"; got action_mode="continuous"')

    def bound(self, line: str) -> float:
        """|u| bound of a line, rad/ns."""
        return {"coupler": self.env.amp_bound, "q0": self.q0_amp_bound, "q1": self.q1_amp_bound}[line]

    def delta(self, line: str) -> float:
        """rad/ns of amplitude change per unit action on a line (the coupler's scaled by bound)."""
        if line == "coupler":  # exactly GateEnv's delta
            return self.env.delta_per_action
        # bound x ratio (the ratio is exactly 1.0 by default): a full action from 0 lands exactly
        # on the line's bound, not one rounding step beyond it
        return self.bound(line) * (self.env.delta_per_action / self.env.amp_bound)

    @property
    def levels(self) -> np.ndarray:
        """(n_levels,) discrete delta levels in units of action, linspace(-1, 1, n_levels)."""
        return np.linspace(-1.0, 1.0, self.n_levels)

    @classmethod
    def from_options(cls, **options) -> MultiGateConfig:
        """Build from keyword options: this class's fields and ``EnvConfig``'s, mixed freely."""
        own = {f.name for f in dataclasses.fields(cls)} - {"env"}
        env_fields = {f.name for f in dataclasses.fields(EnvConfig)}
        unknown = sorted(set(options) - own - env_fields)
        if unknown:
            raise ValueError(f"unknown environment option(s) {unknown}; expected some of {sorted(own | env_fields)}")
        env = EnvConfig(**{k: v for k, v in options.items() if k in env_fields})
        return cls(env=env, **{k: v for k, v in options.items() if k in own})


class MultiGateState(NamedTuple):
    """State of the multi-actuator environment (a pytree of arrays).

    Attributes:
        sectors: propagated computational states.
        amps: (n_agents, K) amplitudes of the last segment per line (rad/ns, clipped; zeros
            after reset), rows in ``actuators`` order.
        idx: () int32 index of the next sample to play.
        unitarity: () unitarity of the gate so far (1 at reset), for the leakage cost.
        device: the (possibly drifted) device of this episode.
        drift_blocks: its sector drift Hamiltonians.
    """

    sectors: SectorState
    amps: jnp.ndarray
    idx: jnp.ndarray
    unitarity: jnp.ndarray
    device: DeviceParams
    drift_blocks: SectorDrift


@dataclasses.dataclass(frozen=True)
class MultiGateEnv:
    """The multi-actuator gate environment (functional core; hashable, a static jit argument).

    Pure functions, jit- and vmap-able (agent-keyed dicts in and out):

        reset(key, params)                  -> obs, state
        step(key, state, actions, params)   -> obs, state, rewards, terminated, truncated, infos
        step_autoreset(key, state, actions, params)   (infos[agent]["final_obs"] as GateEnv)
        action_masks(state)                 -> {agent: (K, n_levels) bool}   (discrete mode)
        reset_info(state)                   -> infos with the structure of ``step``'s

    ``params`` is the single-agent ``EnvParams`` (device + drift), shared by all agents.

    Attributes:
        config: static configuration.
        plan: Taylor plan covering every line's bound and the drift (derived; do not pass).
    """

    config: MultiGateConfig = MultiGateConfig()
    plan: TaylorPlan | None = None

    def __post_init__(self):
        if not isinstance(self.config, MultiGateConfig):
            raise ValueError(f"config: expected quantgate_env.marl.MultiGateConfig, got {type(self.config).__name__}")
        if self.plan is None:
            cfg = self.config
            lines = [(*line_diagonals(a), cfg.bound(a)) for a in cfg.actuators]
            amplitude_options = {"a_scale": cfg.env.a_scale, "a_norm_max": cfg.env.a_norm_max}
            amplitude_options.update({f"{a}_amp_bound": cfg.bound(a) for a in cfg.actuators if a != "coupler"})
            theta = theta_bound_lines(nominal_device(), lines, cfg.env.dt)
            object.__setattr__(self, "plan", plan_for(cfg.env, theta, amplitude_options))

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
    def max_episode_steps(self) -> int:
        return self.config.env.n_steps

    @property
    def default_params(self) -> EnvParams:
        return self.gate.default_params

    @property
    def eval_params(self) -> EnvParams:
        return self.gate.eval_params

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

    def _line_constants(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """Per line (rows in agent order): bounds (n,), deltas (n,), level deltas (n, n_levels)
        in rad/ns (concrete constants, so masks and steps add the very same numbers), diagonals."""
        cfg = self.config
        bounds = np.array([cfg.bound(a) for a in self.agents])
        deltas = np.array([cfg.delta(a) for a in self.agents])
        level_deltas = cfg.levels[None, :] * deltas[:, None]
        diags = [line_diagonals(a) for a in self.agents]
        return bounds, deltas, level_deltas, (np.stack([d[0] for d in diags]), np.stack([d[1] for d in diags]))

    # ---- pure functions -------------------------------------------------------------------

    def reset(self, key: jax.Array, params: EnvParams) -> tuple[dict, MultiGateState]:
        """Start an episode on a device drawn from ``params`` (same draw as ``GateEnv.reset``).

        Returns:
            obs {agent: (obs_dim,) float64} and the state.
        """
        require_x64("MultiGateEnv.reset")
        _, gate_state = self.gate.reset(key, params)
        return self._from_gate_state(gate_state)

    def reset_to(self, device: DeviceParams) -> tuple[dict, MultiGateState]:
        """Start an episode on exactly this device."""
        require_x64("MultiGateEnv.reset_to")
        _, gate_state = self.gate.reset_to(device)
        return self._from_gate_state(gate_state)

    def _from_gate_state(self, gate_state) -> tuple[dict, MultiGateState]:
        state = MultiGateState(
            sectors=gate_state.sectors,
            amps=jnp.zeros((len(self.agents), self.config.env.n_time_steps)),
            idx=gate_state.idx,
            unitarity=jnp.ones(()),
            device=gate_state.device,
            drift_blocks=gate_state.drift_blocks,
        )
        return self._observe(state.sectors, state.amps, state.idx), state

    def action_masks(self, state: MultiGateState) -> dict:
        """Discrete-mode masks {agent: (K, n_levels) bool} for the next step (rule in the module
        docstring: any action drawn component-wise from its mask stays within the bound)."""
        bounds, _, level_deltas, _ = self._line_constants()
        masks = {}
        for i, agent in enumerate(self.agents):
            lo = hi = state.amps[i, -1]
            rows = []
            for _ in range(self.config.env.n_time_steps):
                ok = (lo + level_deltas[i] >= -bounds[i]) & (hi + level_deltas[i] <= bounds[i])
                rows.append(ok)
                lo = lo + jnp.min(jnp.where(ok, level_deltas[i], jnp.inf))
                hi = hi + jnp.max(jnp.where(ok, level_deltas[i], -jnp.inf))
            masks[agent] = jnp.stack(rows)
        return masks

    def reset_info(self, state: MultiGateState) -> dict:
        """Infos of a freshly reset state, with the structure ``step`` returns (zeros for the
        step quantities), so a scan can carry them."""
        metrics = state_metrics(state.sectors, self.config.env.objective, self.config.env.concurrence_weight,
                                self.config.env.unitarity_weight)
        zero = jnp.zeros(())
        n = len(self.agents)
        return self._infos(state, metrics, zero, jnp.zeros((), bool), jnp.zeros(n), zero,
                           jnp.zeros(n, bool))

    def step(self, key: jax.Array, state: MultiGateState, actions: dict, params: EnvParams):
        """Play one segment of K samples on every line at once.

        Args:
            key: unused (kept for the contract).
            state: current state.
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
        require_x64("MultiGateEnv.step")
        del key, params
        cfg, env_cfg = self.config, self.config.env
        missing = [a for a in self.agents if a not in actions]
        if missing:  # trace-time check: the dict structure is static
            raise ValueError(f"actions: missing action(s) for agent(s) {missing}; expected one per agent of {self.agents}")
        bounds, deltas, level_deltas, diagonals = self._line_constants()
        k = env_cfg.n_time_steps
        if cfg.action_mode == "discrete":
            masks = self.action_masks(state)
        requested, masked = [], []
        for i, agent in enumerate(self.agents):
            if cfg.action_mode == "continuous":
                a = jnp.clip(jnp.asarray(actions[agent], dtype=jnp.float64), -1.0, 1.0)
                requested.append(state.amps[i, -1] + jnp.cumsum(a * deltas[i]))  # as GateEnv.step
            else:
                levels = jnp.reshape(jnp.asarray(actions[agent], dtype=jnp.int32), (k,))
                u, samples = state.amps[i, -1], []
                for j in range(k):  # sequential sums: the very additions the mask bounds
                    u = u + jnp.asarray(level_deltas[i])[levels[j]]
                    samples.append(u)
                requested.append(jnp.stack(samples))
                masked.append(~jnp.all(masks[agent][jnp.arange(k), levels]))
        requested = jnp.stack(requested)  # (n_agents, K)
        bounds_col = jnp.asarray(bounds)[:, None]
        excess = jnp.sum(normalised_excess(requested, bounds_col), axis=-1)  # (n_agents,)
        amps = jnp.clip(requested, -bounds_col, bounds_col)

        sectors, _ = propagate_samples_lines(state.sectors, state.drift_blocks, amps.T, diagonals, env_cfg.dt, self.plan)
        metrics = state_metrics(sectors, env_cfg.objective, env_cfg.concurrence_weight, env_cfg.unitarity_weight)
        tv = env_cfg.tv_penalty_scale * jnp.sum(jnp.abs(jnp.diff(amps, axis=-1)))  # within the segment only
        excess_total = jnp.sum(excess)
        reward, truncated = segment_reward(env_cfg, metrics.JT, tv, excess_total, state.idx)

        idx = state.idx + k
        terminated = idx + k - 1 >= env_cfg.pulse_length
        obs = self._observe(sectors, amps, state.idx)  # time feature before the advance (v1)
        leakage_increase = state.unitarity - metrics.unitarity  # (1 - U_after) - (1 - U_before)
        new_state = state._replace(sectors=sectors, amps=amps, idx=idx, unitarity=metrics.unitarity)
        masked = jnp.stack(masked) if masked else jnp.zeros(len(self.agents), bool)
        infos = self._infos(new_state, metrics, tv, excess_total > 0, excess, leakage_increase, masked)
        team = lambda x: dict.fromkeys(self.agents, x)  # noqa: E731 (one value for every agent)
        return obs, new_state, team(reward), team(terminated), team(truncated), infos

    def step_autoreset(self, key: jax.Array, state: MultiGateState, actions: dict, params: EnvParams):
        """``step``, then restart a finished episode in place (all agents end together).

        As ``GateEnv.step_autoreset``: a new device (resample drift) or the same one (fixed
        drift); ``infos[agent]["final_obs"]`` is the finished episode's last observation, and
        ``action_mask`` describes the state returned (the reset one where done).
        """
        obs, new_state, rewards, terminated, truncated, infos = self.step(key, state, actions, params)
        if self.config.env.resample_drift:
            reset_obs, reset_state = self.reset(key, params)
        else:
            reset_obs, reset_state = self.reset_to(new_state.device)
        done = terminated[self.agents[0]] | truncated[self.agents[0]]
        new_state = jax.tree.map(lambda new, old: jnp.where(done, new, old), reset_state, new_state)
        out_obs = {a: jnp.where(done, reset_obs[a], obs[a]) for a in self.agents}
        masks = self.action_masks(new_state) if self.config.action_mode == "discrete" else {}
        infos = {a: dict(infos[a], final_obs=obs[a], **({"action_mask": masks[a]} if masks else {})) for a in self.agents}
        return out_obs, new_state, rewards, terminated, truncated, infos

    # ---- helpers --------------------------------------------------------------------------

    def _observe(self, sectors: SectorState, amps: jnp.ndarray, idx: jnp.ndarray) -> dict:
        bounds = self._line_constants()[0]
        gate = self.gate
        # GateEnv normalises amplitudes by the coupler bound; rescale so each agent reads its own
        # line as u / B_line (the factor is exactly 1.0 for the coupler).
        scale = self.config.env.amp_bound / bounds
        return {a: gate._observe(sectors, amps[i] * scale[i], idx) for i, a in enumerate(self.agents)}

    def _infos(self, state, metrics, tv, oob, excess, leakage_increase, masked) -> dict:
        shared = {
            "JT": metrics.JT,
            "concurrence": metrics.concurrence,
            "unitarity": metrics.unitarity,
            "tv_penalty": tv,
            "oob": oob,
            "t": state.idx * self.config.env.dt,
            "leakage_increase": leakage_increase,
        }
        discrete = self.config.action_mode == "discrete"
        masks = self.action_masks(state) if discrete else {}
        infos = {}
        for i, agent in enumerate(self.agents):
            info = dict(shared, amps=state.amps[i], excess=excess[i], cost=excess[i] + leakage_increase)
            if discrete:
                info.update(action_mask=masks[agent], masked_action=masked[i])
            infos[agent] = info
        return infos


def make_multi(**options) -> MultiGateEnv:
    """Build the functional multi-actuator environment from keyword options.

    Accepts ``MultiGateConfig`` fields (actuators, q0_amp_bound, q1_amp_bound, action_mode,
    n_levels, mask_in_obs, masked_action) and ``EnvConfig`` fields (pulse_length, oob_mode, ...).
    ``make_multi(actuators=("coupler",))`` is the single-agent paper MDP with agent-keyed dicts.
    """
    return MultiGateEnv(MultiGateConfig.from_options(**options))
