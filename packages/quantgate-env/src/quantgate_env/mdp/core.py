"""One MDP for any tuple of control lines: the functional core behind ``GateEnv`` and ``MultiGateEnv``.

The single-line environment (``single_line.GateEnv``, the paper's MDP) is this core with the coupler line
alone; the multi-actuator environment (``multi_line.MultiGateEnv``) is the same core with more lines.
Both are thin views that convert arrays to their public shapes (a (K,) action and a (28,)
observation; agent-keyed dicts). Everything that decides the MDP lives here, once:

* ``step``: actions -> amplitudes (continuous deltas or discrete levels, clip, excess), exact
  propagation (``config.env.propagation``: the default series, or its fast form), metrics,
  reward, flags, infos; a finished state is frozen (below);
* ``next_episode``: the one rule for starting the next episode after one ends (a device drawn
  afresh with ``resample_drift``, else the finished episode's device), used by ``step_autoreset``
  and by every adapter (Gymnasium, PettingZoo, gymnax, JaxMARL);
* ``observe``: the observation of a state (the state keeps the index whose time feature the
  current observation reads, so adapters need not store observations);
* ``action_masks``: the discrete masks (rule in ``quantgate_env.mdp.multi_line``).

Arrays are per line in ``actuators`` order: actions (n_lines, K), observations (n_lines, obs_dim),
per-line infos (n_lines, ...); reward and flags are team scalars.

**Finished states.** The state keeps ``terminated`` and ``truncated`` of its last step. ``step`` on
a state whose episode ended simulates nothing: it returns the same state, the same observation,
reward 0, the stored flags, and infos of that state (tv_penalty, excess, oob, leakage_increase,
cost 0). Python callers that hold a concrete state get a RuntimeError instead (``GateEnv.step``
and ``MultiGateEnv.step`` called eagerly, the Gymnasium and PettingZoo adapters); inside ``jit`` the
frozen state is the documented answer. Adapters with their own time limit (gymnax, JaxMARL) mark
the core state ``truncated`` when it expires, so the core freezes it too.

**Precision.** ``config.env.precision = "float64"`` (default) traces only under JAX's x64 mode
(``precision.require_x64``); ``"float32"`` makes every array float32/complex64 whatever the x64
switch, and re-normalises the sector states after every sample (``propagation.renormalise``).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..physics.device import DeviceParams, nominal_device
from ..physics.drift import DriftParams, draw_device
from ..physics.fast_propagation import propagate_samples_lines_fast
from ..physics.hamiltonian import SectorDrift, line_diagonals, sector_drift
from ..physics.metrics import state_metrics
from ..physics.propagation import SectorState, TaylorPlan, initial_sector_state, propagate_samples_lines
from ..precision import require_x64
from ..validation import check_action_shape, instance_of
from .config import MultiGateConfig
from .plan import lines_plan

__all__ = ["CoreState", "EnvParams", "GateCore", "normalised_excess", "segment_reward"]


class EnvParams(NamedTuple):
    """Physical numbers of the environment (a pytree of arrays; vmap over it for many devices).

    Attributes:
        device: the nominal device (GHz).
        drift: drift half-widths applied at reset.
    """

    device: DeviceParams
    drift: DriftParams


class CoreState(NamedTuple):
    """State of the core (a pytree of arrays; ``EnvState`` and ``MultiGateState`` are this type).

    Attributes:
        sectors: propagated computational states.
        amps: (n_lines, K) amplitudes of the last segment per line (rad/ns, clipped; zeros after
            reset), rows in ``actuators`` order.
        idx: () int32 index of the next sample to play.
        unitarity: () unitarity of the gate so far (1 at reset), for the leakage cost.
        device: the (possibly drifted) device of this episode.
        drift_blocks: its sector drift Hamiltonians, computed once per episode.
        obs_idx: () int32 sample index the current observation's time feature reads (0 after
            reset, the segment's first sample after a step: the paper's off-by-one).
        terminated: () bool, the last step ended the pulse.
        truncated: () bool, the last step truncated (out of bounds in terminate mode, or an
            adapter's time limit).
    """

    sectors: SectorState
    amps: jnp.ndarray
    idx: jnp.ndarray
    unitarity: jnp.ndarray
    device: DeviceParams
    drift_blocks: SectorDrift
    obs_idx: jnp.ndarray
    terminated: jnp.ndarray
    truncated: jnp.ndarray

    @property
    def done(self) -> jnp.ndarray:
        """() bool: the episode has ended (terminated or truncated)."""
        return self.terminated | self.truncated


def normalised_excess(u, bound):
    """max(|u| / bound - 1, 0) elementwise, exactly 0 for every |u| <= bound.

    Written as max(|u| - bound, 0) / bound: XLA on CPU may evaluate |u| / bound - 1 as
    fma(|u|, 1/bound, -1), which gives 2^-54 > 0 at u = bound exactly (u = 20 after a full
    action from 0 would count as out of bounds and truncate). The subtraction is exact there.

    Args:
        u: amplitudes, rad/ns (any shape).
        bound: |u| bound, rad/ns (scalar or broadcastable).
    """
    return jnp.maximum(jnp.abs(u) - bound, 0.0) / bound


def segment_reward(cfg, jt, tv, excess, idx_start):
    """The gate reward of one step and the out-of-bounds truncation flag (spec 3.3, 4.2).

    Args:
        cfg: ``EnvConfig`` (reward shaping and oob mode).
        jt: () cost of the active objective after the segment.
        tv: () total-variation penalty already scaled by ``tv_penalty_scale``.
        excess: () normalised out-of-bounds excess of the requested amplitudes, summed over lines.
        idx_start: () int32 index of the segment's first sample.

    Returns:
        (reward (), truncated () bool).
    """
    reward = -jnp.log10(jnp.maximum(jt, cfg.jt_floor)) * cfg.rew_scale - cfg.reward_offset - tv
    if cfg.oob_mode == "terminate":
        oob = excess > 0
        penalty = cfg.terminal_penalty * (1.0 - idx_start / cfg.pulse_length)
        return jnp.where(oob, penalty, reward), oob
    return reward - cfg.oob_penalty * excess, jnp.zeros((), dtype=bool)


def _concrete(x) -> bool:
    """Whether ``x`` holds a value Python can read (not a tracer of jit, vmap or grad)."""
    return not isinstance(x, jax.core.Tracer)


@dataclasses.dataclass(frozen=True)
class GateCore:
    """The gate MDP for any tuple of control lines (hashable: a valid static ``jit`` argument).

    Attributes:
        config: lines, bounds, action mode and the ``EnvConfig``.
        plan: static Taylor plan covering every line's bound and the drift (``plan.lines_plan``;
            derived, do not pass by hand).
    """

    config: MultiGateConfig = MultiGateConfig()
    plan: TaylorPlan | None = None

    def __post_init__(self):
        instance_of("config", self.config, MultiGateConfig, "quantgate_env.MultiGateConfig")
        if self.plan is None:
            object.__setattr__(self, "plan", lines_plan(self.config))

    # ---- static description -------------------------------------------------------------

    @property
    def lines(self) -> tuple[str, ...]:
        """Control lines (= agents), in order."""
        return self.config.actuators

    @property
    def float_dtype(self):
        """float64 or float32 (``precision``)."""
        return jnp.float32 if self.config.env.precision == "float32" else jnp.float64

    @property
    def complex_dtype(self):
        """complex128 or complex64 (``precision``): the dtype of the propagated states."""
        return jnp.complex64 if self.config.env.precision == "float32" else jnp.complex128

    @property
    def max_episode_steps(self) -> int:
        """Steps of a full episode (333 for the paper)."""
        return self.config.env.n_steps

    @property
    def requires_x64(self) -> bool:
        """Whether callers must trace this core under JAX's x64 mode (docs/contracts.md).

        True for the default ``precision="float64"`` (its functions refuse to trace without x64:
        float32 rounding moves J_T by ~1e-4), False for ``"float32"``. A trainer reads it to
        decide its run's precision.
        """
        return self.config.env.precision == "float64"

    @property
    def default_params(self) -> EnvParams:
        """Training parameters: the nominal device with the configured drift half-widths.

        The leaves are numpy arrays, so this works inside ``jit`` too.
        """
        cfg = self.config.env
        drift = DriftParams(*(np.asarray(float(x)) for x in (cfg.max_drift, cfg.qubit_drift_mhz, cfg.coupler_drift_mhz, cfg.g_drift_mhz)))
        return self._numpy_params(EnvParams(nominal_device(), drift))

    @property
    def eval_params(self) -> EnvParams:
        """Evaluation parameters: the nominal device, no drift (numpy; works inside ``jit``)."""
        return self._numpy_params(EnvParams(nominal_device(), DriftParams(*(np.zeros(()) for _ in DriftParams._fields))))

    def _numpy_params(self, params: EnvParams) -> EnvParams:
        dtype = np.float32 if self.config.env.precision == "float32" else np.float64
        return jax.tree.map(lambda x: np.asarray(x, dtype=dtype), params)

    @functools.cached_property
    def _constants(self):
        """Per-line constants (rows in line order), numpy float64.

        Bounds (n,), deltas (n,), level deltas (n, n_levels) rad/ns (the very numbers masks and
        steps add), diagonals ((n, 3), (n, 6)).
        """
        cfg = self.config
        bounds = np.array([cfg.bound(a) for a in self.lines])
        deltas = np.array([cfg.delta(a) for a in self.lines])
        level_deltas = cfg.levels[None, :] * deltas[:, None]
        diags = [line_diagonals(a) for a in self.lines]
        return bounds, deltas, level_deltas, (np.stack([d[0] for d in diags]), np.stack([d[1] for d in diags]))

    def _const(self, x):
        return jnp.asarray(x, dtype=self.float_dtype)

    def _require_precision(self, what: str) -> None:
        if self.config.env.precision == "float64":
            require_x64(what)

    # ---- episodes -----------------------------------------------------------------------

    def reset(self, key: jax.Array, params: EnvParams, what: str = "GateCore.reset") -> tuple[jnp.ndarray, CoreState]:
        """Start an episode on a device drawn from ``params`` (the nominal one without drift).

        Returns:
            obs (n_lines, obs_dim) and the state.
        """
        self._require_precision(what)
        params = jax.tree.map(self._const, params)
        return self.reset_to(draw_device(key, params.device, params.drift, self.float_dtype), what)

    def reset_to(self, device: DeviceParams, what: str = "GateCore.reset_to") -> tuple[jnp.ndarray, CoreState]:
        """Start an episode on exactly this device (no randomness)."""
        self._require_precision(what)
        device = jax.tree.map(self._const, device)
        false = jnp.zeros((), dtype=bool)
        zero = jnp.zeros((), dtype=jnp.int32)
        state = CoreState(
            sectors=initial_sector_state(self.complex_dtype),
            amps=jnp.zeros((len(self.lines), self.config.env.n_time_steps), dtype=self.float_dtype),
            idx=zero,
            unitarity=jnp.ones((), dtype=self.float_dtype),
            device=device,
            drift_blocks=sector_drift(device, self.float_dtype),
            obs_idx=zero,
            terminated=false,
            truncated=false,
        )
        return self.observe(state), state

    def next_episode(self, key: jax.Array, state: CoreState, params: EnvParams) -> tuple[jnp.ndarray, CoreState]:
        """The next episode after ``state``'s: the one "start the next episode" rule.

        ``resample_drift=True``: a device drawn from ``params`` with ``key`` (``reset``);
        ``False``: the finished episode's own device (every drifted quantity persists).

        Returns:
            obs (n_lines, obs_dim) and the new state.
        """
        if self.config.env.resample_drift:
            return self.reset(key, params, "next_episode")
        return self.reset_to(state.device, "next_episode")

    # ---- observation and masks ----------------------------------------------------------

    def observe(self, state: CoreState) -> jnp.ndarray:
        """(n_lines, obs_dim) observations of ``state``, all x ``obs_scale``.

        Per line: the 24 shared gate features (``single_line.observation_layout``), the line's own K
        amplitudes / its bound, the time feature 2 obs_idx / pulse_length - 1.
        """
        cfg = self.config.env
        bounds = self._constants[0]
        sectors = state.sectors
        z = jnp.concatenate([sectors.psi1[:, 0], sectors.psi1[:, 1], sectors.psi2])
        pairs = jnp.stack([2.0 * jnp.abs(z) - 1.0, jnp.angle(z) / jnp.pi], axis=-1).reshape(-1)
        time = 2.0 * state.obs_idx.astype(self.float_dtype) / cfg.pulse_length - 1.0
        # u / B_line written as (u * (B_coupler / B_line)) / B_coupler: the factor is exactly 1.0
        # for the coupler, so its feature is the single-line u / B bit for bit
        scale = cfg.amp_bound / bounds
        rows = [cfg.obs_scale * jnp.concatenate([pairs, state.amps[i] * self._const(scale[i]) / cfg.amp_bound,
                                                 jnp.reshape(time, (1,))])
                for i in range(len(self.lines))]
        return jnp.stack(rows)

    def action_masks(self, state: CoreState) -> jnp.ndarray:
        """Discrete-mode masks (n_lines, K, n_levels) bool for the next step.

        The rule is in ``quantgate_env.mdp.multi_line``: any action drawn component-wise from its mask stays
        in bounds.
        """
        bounds, _, level_deltas, _ = self._constants
        masks = []
        for i in range(len(self.lines)):
            lo = hi = state.amps[i, -1]
            levels, bound = self._const(level_deltas[i]), self._const(bounds[i])
            rows = []
            for _ in range(self.config.env.n_time_steps):
                ok = (lo + levels >= -bound) & (hi + levels <= bound)
                rows.append(ok)
                lo = lo + jnp.min(jnp.where(ok, levels, jnp.inf))
                hi = hi + jnp.max(jnp.where(ok, levels, -jnp.inf))
            masks.append(jnp.stack(rows))
        return jnp.stack(masks)

    # ---- step ---------------------------------------------------------------------------

    def check_actions(self, actions, names: tuple[str, ...] | None = None) -> None:
        """Trace-time check of (n_lines, K) actions, one row per line (``validation``)."""
        k = self.config.env.n_time_steps
        integer = self.config.action_mode == "discrete"
        for i, name in enumerate(names or [f"action[{i}]" for i in range(len(self.lines))]):
            check_action_shape(name, actions[i], (k,), integer)

    def step(self, key: jax.Array, state: CoreState, actions, params: EnvParams, what: str = "GateCore.step"):
        """Play one segment of K samples on every line at once.

        Args:
            key: unused by the MDP (kept for the contract).
            state: current state; if its episode ended, it is returned frozen (module docstring).
            actions: a sequence of n_lines (K,) actions in line order. Continuous: deltas in
                units of the line's ``delta``, clipped to [-1, 1]. Discrete: level indices in
                [0, n_levels) (masks are not enforced: a masked level is played and flagged).
            params: environment parameters (the device in use is ``state.device``).
            what: the caller's name in error messages (float64 not enabled, episode already ended).

        Returns:
            obs (n_lines, obs_dim), state, reward (), terminated () bool, truncated () bool, info:
            shared JT, concurrence, unitarity, tv_penalty, oob, t, leakage_increase (()) and per
            line amps (n, K), excess (n,), cost (n,), and in discrete mode action_mask
            (n, K, n_levels) of the returned state and masked_action (n,).
        """
        self._require_precision(what)
        del key, params
        cfg, env_cfg = self.config, self.config.env
        self.check_actions(actions)
        if _concrete(state.terminated) and _concrete(state.truncated) and bool(jnp.any(state.done)):
            raise RuntimeError(f"{what}: the episode already ended (terminated or truncated); reset it first "
                               "(inside jit a finished state is returned unchanged, reward 0)")
        bounds, deltas, level_deltas, diagonals = self._constants
        k = env_cfg.n_time_steps
        requested, masked = [], []
        if cfg.action_mode == "discrete":
            masks = self.action_masks(state)
        for i in range(len(self.lines)):
            if cfg.action_mode == "continuous":
                a = jnp.clip(jnp.asarray(actions[i], dtype=self.float_dtype), -1.0, 1.0)
                requested.append(state.amps[i, -1] + jnp.cumsum(a * self._const(deltas[i])))
            else:
                levels = jnp.reshape(jnp.asarray(actions[i], dtype=jnp.int32), (k,))
                u, samples = state.amps[i, -1], []
                for j in range(k):  # sequential sums: the very additions the mask bounds
                    u = u + self._const(level_deltas[i])[levels[j]]
                    samples.append(u)
                requested.append(jnp.stack(samples))
                masked.append(~jnp.all(masks[i][jnp.arange(k), levels]))
        requested = jnp.stack(requested)  # (n_lines, K)
        bounds_col = self._const(bounds)[:, None]
        excess = jnp.sum(normalised_excess(requested, bounds_col), axis=-1)  # (n_lines,)
        amps = jnp.clip(requested, -bounds_col, bounds_col)

        # "exact" (default) is the series every earlier run reproduces bit for bit; "fast" the same
        # series unrolled (``fast_propagation``), equal to rounding only
        propagate = propagate_samples_lines if env_cfg.propagation == "exact" else propagate_samples_lines_fast
        sectors, _ = propagate(state.sectors, state.drift_blocks, amps.T, diagonals, env_cfg.dt, self.plan,
                               renormalised=env_cfg.precision == "float32")
        # A finished episode is frozen: its sectors are kept and the step's quantities are
        # selected away at the end (the arithmetic above and below is the unfrozen step's, op for
        # op, so a live step rounds exactly as before the freeze existed).
        over = state.done
        keep = lambda old, new: jnp.where(over, old, new)  # noqa: E731
        sectors = jax.tree.map(keep, state.sectors, sectors)
        metrics = state_metrics(sectors, env_cfg.objective, env_cfg.concurrence_weight, env_cfg.unitarity_weight)
        tv = env_cfg.tv_penalty_scale * jnp.sum(jnp.abs(jnp.diff(amps, axis=-1)))  # within the segment only
        excess_total = jnp.sum(excess)
        # int32 idx / int divides in float32 (JAX's rule), as the penalty always has
        reward, truncated = segment_reward(env_cfg, metrics.JT, tv, excess_total, state.idx)

        idx = state.idx + k
        terminated = keep(state.terminated, idx + k - 1 >= env_cfg.pulse_length)
        truncated = keep(state.truncated, truncated)
        new_state = state._replace(sectors=sectors, amps=keep(state.amps, amps), idx=keep(state.idx, idx),
                                   unitarity=metrics.unitarity, obs_idx=keep(state.obs_idx, state.idx),
                                   terminated=terminated, truncated=truncated)
        obs = self.observe(new_state)  # time feature before the advance (v1)
        leakage_increase = state.unitarity - metrics.unitarity  # (1 - U_after) - (1 - U_before)
        masked = jnp.stack(masked) if masked else jnp.zeros(len(self.lines), bool)
        zero = lambda x: jnp.where(over, jnp.zeros_like(x), x)  # noqa: E731
        info = self._info(new_state, metrics, zero(tv), zero(excess_total > 0), zero(excess), zero(leakage_increase),
                          zero(masked))
        reward = zero(reward)
        return obs, new_state, reward, terminated, truncated, info

    def step_autoreset(self, key: jax.Array, state: CoreState, actions, params: EnvParams, what: str = "GateCore.step_autoreset"):
        """``step``, then ``next_episode`` where the episode ended (all lines end together).

        ``info["final_obs"]`` (n_lines, obs_dim) is the step's own observation (the finished
        episode's last one where done); ``action_mask`` describes the state returned.
        """
        obs, new_state, reward, terminated, truncated, info = self.step(key, state, actions, params, what)
        reset_obs, reset_state = self.next_episode(key, new_state, params)
        done = terminated | truncated
        out_state = jax.tree.map(lambda new, old: jnp.where(done, new, old), reset_state, new_state)
        info = dict(info, final_obs=obs)
        if self.config.action_mode == "discrete":
            info["action_mask"] = self.action_masks(out_state)
        return jnp.where(done, reset_obs, obs), out_state, reward, terminated, truncated, info

    def reset_info(self, state: CoreState) -> dict:
        """Info of a freshly reset state, with the structure ``step`` returns.

        The step quantities are zeros, so a scan can carry it.
        """
        env_cfg = self.config.env
        metrics = state_metrics(state.sectors, env_cfg.objective, env_cfg.concurrence_weight, env_cfg.unitarity_weight)
        zero = jnp.zeros((), self.float_dtype)
        n = len(self.lines)
        return self._info(state, metrics, zero, jnp.zeros((), bool), jnp.zeros(n, self.float_dtype), zero,
                          jnp.zeros(n, bool))

    def _info(self, state, metrics, tv, oob, excess, leakage_increase, masked) -> dict:
        info = {
            "JT": metrics.JT,
            "concurrence": metrics.concurrence,
            "unitarity": metrics.unitarity,
            "tv_penalty": tv,
            "oob": oob,
            "t": state.idx.astype(self.float_dtype) * self.config.env.dt,
            "leakage_increase": leakage_increase,
            "amps": state.amps,
            "excess": excess,
            "cost": excess + leakage_increase,
        }
        if self.config.action_mode == "discrete":
            info.update(action_mask=self.action_masks(state), masked_action=masked)
        return info
