"""The gate environment as pure functions (the functional step contract of docs/contracts.md).

``GateEnv`` is a frozen, hashable dataclass (pass it as a static argument to ``jax.jit``); its
methods are pure functions of explicit pytrees, jit- and vmap-able:

    reset(key, params)                -> obs, state
    step(key, state, action, params)  -> obs, state, reward, terminated, truncated, info
    step_autoreset(key, state, action, params)   (finished episodes restart inside;
                                                   info["final_obs"] keeps their last observation)

By default it is the paper run's MDP step for step (spec 3); see ``EnvConfig`` for the switches.
The physics is float64: trace these functions under ``jax.enable_x64(True)``.
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
from .drift import DriftParams, draw_device, no_drift
from .evaluation import GateEvaluation
from .hamiltonian import SectorDrift, sector_drift
from .metrics import state_metrics
from .precision import require_x64
from .propagation import (
    MAX_THETA,
    SectorState,
    TaylorPlan,
    initial_sector_state,
    propagate_samples,
    taylor_plan,
    theta_bound,
)

__all__ = ["EnvParams", "EnvState", "GateEnv", "make", "observation_layout"]

# Frequency slack (GHz) the propagation plan covers beyond the configured drift, so that
# robustness maps and evaluation on nearby devices stay exact (a sample outside the plan would
# report NaN, never a silently wrong state).
_PLAN_SLACK_GHZ = 0.1


class EnvParams(NamedTuple):
    """Physical numbers of the environment (a pytree of arrays; vmap over it for many devices).

    Attributes:
        device: the nominal device (GHz).
        drift: drift half-widths applied at reset.
    """

    device: DeviceParams
    drift: DriftParams


class EnvState(NamedTuple):
    """Environment state (a pytree of arrays).

    Attributes:
        sectors: propagated computational states.
        amps: (K,) amplitudes of the last segment (rad/ns, clipped; zeros after reset).
        idx: () int32 index of the next sample to play.
        device: the (possibly drifted) device of this episode.
        drift_blocks: its sector drift Hamiltonians, computed once per episode.
    """

    sectors: SectorState
    amps: jnp.ndarray
    idx: jnp.ndarray
    device: DeviceParams
    drift_blocks: SectorDrift


def observation_layout(n_time_steps: int = 3) -> list[str]:
    """Names of the observation entries, in order (all multiplied by ``obs_scale``).

    12 complex amplitudes z as (2|z| - 1, arg z / pi) pairs: the image of |01> (= |010>) on
    |001>, |010>, |100>; of |10> (= |100>) on the same; of |11> (= |110>) on |002>, |011>, |020>,
    |101>, |110>, |200>. Then the K segment amplitudes u_k / (a_norm_max a_scale), then the time
    feature 2 idx / pulse_length - 1 taken *before* the index advances (the paper's off-by-one:
    the first two observations both read -1).
    """
    kets = [("01", k) for k in ("001", "010", "100")] + [("10", k) for k in ("001", "010", "100")]
    kets += [("11", k) for k in ("002", "011", "020", "101", "110", "200")]
    names = []
    for source, ket in kets:
        names += [f"abs<{ket}|U|{source}>", f"arg<{ket}|U|{source}>"]
    return names + [f"u_{k}" for k in range(n_time_steps)] + ["time"]


_DRIFT_OPTIONS = ("max_drift", "qubit_drift_mhz", "coupler_drift_mhz", "g_drift_mhz")


def _drift_theta(cfg: EnvConfig, slack_ghz: float) -> float:
    """How far the configured drift (plus ``slack_ghz``) can move the Gershgorin bound, x dt."""
    nominal = nominal_device()
    qubit_shift = cfg.max_drift * float(np.max(nominal.omega_q)) + 1e-3 * cfg.qubit_drift_mhz
    freq_shift = max(qubit_shift, 1e-3 * cfg.coupler_drift_mhz) + slack_ghz
    g_shift = 1e-3 * cfg.g_drift_mhz + slack_ghz
    # A row of the N=2 block holds at most two quanta on a mode (2 x frequency shift) and
    # couplings up to sqrt(2) 2 pi g on two neighbours: bound how far Gershgorin can move.
    return 2 * math.pi * (2 * freq_shift + 2 * math.sqrt(2) * g_shift) * cfg.dt


def plan_for(cfg: EnvConfig, control_theta: float, amplitude_options: dict[str, float] | None = None) -> TaylorPlan:
    """Taylor plan exact for the controls' ``control_theta`` on the nominal device plus drift.

    Args:
        cfg: configuration (dt and drift magnitudes).
        control_theta: ``theta_bound``/``theta_bound_lines`` of the controls' bounds on the
            nominal device (dimensionless).
        amplitude_options: the options that set the controls' bounds, by name, for the error
            message (default: ``a_scale`` and ``a_norm_max``).

    Raises:
        ValueError: the settings need more than ``propagation.MAX_THETA`` per sample; the message
            names the options responsible (dt = T / pulse_length, the amplitude bound or the
            drift) and the largest dt that would be accepted.
    """
    theta = 1.02 * control_theta + _drift_theta(cfg, _PLAN_SLACK_GHZ)
    if not theta <= MAX_THETA:  # also catches NaN
        amplitude_options = amplitude_options or {"a_scale": cfg.a_scale, "a_norm_max": cfg.a_norm_max}
        raise ValueError(_plan_bound_message(cfg, control_theta, theta, amplitude_options))
    return taylor_plan(theta)


def _plan_bound_message(cfg: EnvConfig, control_theta: float, theta: float, amplitude_options: dict[str, float]) -> str:
    """Which options push a sample beyond the propagator's bound, and how to fix it."""
    device = 1.02 * theta_bound(nominal_device(), 0.0, cfg.dt)  # no control, no drift
    controls = 1.02 * control_theta - device
    no_drift = dataclasses.replace(cfg, **{k: 0.0 for k in _DRIFT_OPTIONS})
    slack = _drift_theta(no_drift, _PLAN_SLACK_GHZ)
    drift = _drift_theta(cfg, _PLAN_SLACK_GHZ) - slack
    # dt is to blame if the paper's amplitude bound without drift would already be too much
    paper_theta = 1.02 * theta_bound(nominal_device(), EnvConfig().amp_bound, cfg.dt) + slack
    shorter = f"keep dt <= {MAX_THETA / theta * cfg.dt:.3g} ns (raise pulse_length or lower T)" if math.isfinite(theta) else ""
    if paper_theta > MAX_THETA:
        culprit, fix = f"T={cfg.T!r}, pulse_length={cfg.pulse_length!r}", shorter
    elif not (math.isfinite(controls) and controls <= drift):
        culprit = ", ".join(f"{k}={v!r}" for k, v in amplitude_options.items())
        fix = "lower the amplitude bound(s)" + (f", or {shorter}" if shorter else "")
    else:
        culprit = ", ".join(f"{k}={getattr(cfg, k)!r}" for k in _DRIFT_OPTIONS if getattr(cfg, k))
        fix = f"lower the drift, or {shorter}"
    return (
        f"{culprit}: samples of dt = T / pulse_length = {cfg.dt:.4g} ns would have a phase spread theta = "
        f"{theta:.4g} rad each (device {device:.3g}, control bounds {controls:.3g}, drift {drift:.3g}, "
        f"slack {slack:.3g}), beyond the {MAX_THETA:g} the exact propagator covers (see quantgate_env.propagation); {fix}"
    )


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


def segment_reward(cfg: EnvConfig, jt, tv, excess, idx_start):
    """The gate reward of one step and the out-of-bounds truncation flag (spec 3.3, 4.2).

    Shared by the single- and multi-agent environments so both pay exactly the same reward.

    Args:
        cfg: configuration (reward shaping and oob mode).
        jt: () cost of the active objective after the segment.
        tv: () total-variation penalty already scaled by ``tv_penalty_scale``.
        excess: () normalised out-of-bounds excess of the requested amplitudes (0 if in bounds).
        idx_start: () index of the segment's first sample.

    Returns:
        (reward (), truncated () bool).
    """
    reward = -jnp.log10(jnp.maximum(jt, cfg.jt_floor)) * cfg.rew_scale - cfg.reward_offset - tv
    if cfg.oob_mode == "terminate":
        oob = excess > 0
        penalty = cfg.terminal_penalty * (1.0 - idx_start / cfg.pulse_length)
        return jnp.where(oob, penalty, reward), oob
    return reward - cfg.oob_penalty * excess, jnp.zeros((), dtype=bool)


@dataclasses.dataclass(frozen=True)
class GateEnv:
    """The perfect-entangler gate environment (functional core).

    Attributes:
        config: static configuration.
        plan: static Taylor plan of the exact propagation, covering the amplitude bound and the
            configured drift (computed from the config; do not pass by hand).
    """

    config: EnvConfig = EnvConfig()
    plan: TaylorPlan | None = None

    def __post_init__(self):
        if not isinstance(self.config, EnvConfig):
            raise ValueError(f"config: expected quantgate_env.EnvConfig, got {type(self.config).__name__}")
        if self.plan is None:
            object.__setattr__(self, "plan", self._default_plan())

    # ---- static description -------------------------------------------------------------

    def _default_plan(self) -> TaylorPlan:
        cfg = self.config
        return plan_for(cfg, theta_bound(nominal_device(), cfg.amp_bound, cfg.dt))

    @property
    def max_episode_steps(self) -> int:
        """Steps of a full episode (333 for the paper)."""
        return self.config.n_steps

    @property
    def observation_space(self) -> gymnasium.spaces.Box:
        """Box of shape (obs_dim,): every entry lies in [-obs_scale, obs_scale]."""
        s = self.config.obs_scale
        return gymnasium.spaces.Box(-s, s, shape=(self.config.obs_dim,), dtype=np.float32)

    @property
    def action_space(self) -> gymnasium.spaces.Box:
        """Box of shape (K,) in [-1, 1]: amplitude deltas in units of ``delta_per_action``."""
        return gymnasium.spaces.Box(-1.0, 1.0, shape=(self.config.n_time_steps,), dtype=np.float32)

    @property
    def default_params(self) -> EnvParams:
        """Training parameters: the nominal device with the configured drift half-widths."""
        cfg = self.config
        drift = DriftParams(*(np.asarray(float(x)) for x in (cfg.max_drift, cfg.qubit_drift_mhz, cfg.coupler_drift_mhz, cfg.g_drift_mhz)))
        return EnvParams(nominal_device(), drift)

    @property
    def eval_params(self) -> EnvParams:
        """Evaluation parameters: the nominal device, no drift."""
        return EnvParams(nominal_device(), jax.tree.map(np.asarray, no_drift()))

    @property
    def evaluation(self):
        """What an agent records and prints of an evaluation episode (docs/contracts.md)."""
        return GateEvaluation()

    # ---- pure functions -------------------------------------------------------------------

    def reset(self, key: jax.Array, params: EnvParams) -> tuple[jnp.ndarray, EnvState]:
        """Start an episode on a device drawn from ``params`` (the nominal one without drift).

        Returns:
            obs (obs_dim,) float64 and the state.
        """
        require_x64("GateEnv.reset")
        return self.reset_to(draw_device(key, params.device, params.drift))

    def reset_to(self, device: DeviceParams) -> tuple[jnp.ndarray, EnvState]:
        """Start an episode on exactly this device (no randomness)."""
        require_x64("GateEnv.reset_to")
        device = jax.tree.map(lambda x: jnp.asarray(x, dtype=jnp.float64), device)
        state = EnvState(
            sectors=initial_sector_state(),
            amps=jnp.zeros(self.config.n_time_steps),
            idx=jnp.zeros((), dtype=jnp.int32),
            device=device,
            drift_blocks=sector_drift(device),
        )
        return self._observe(state.sectors, state.amps, state.idx), state

    def step(self, key: jax.Array, state: EnvState, action: jnp.ndarray, params: EnvParams):
        """Play one segment of K samples.

        Args:
            key: unused by the paper MDP (kept for the contract).
            state: current state.
            action: (K,) amplitude deltas in units of ``delta_per_action``; clipped to [-1, 1].
            params: environment parameters (the device in use is ``state.device``).

        Returns:
            obs (obs_dim,), state, reward (), terminated () bool (the pulse ended), truncated ()
            bool (out of bounds in terminate mode), info dict: JT, concurrence, unitarity,
            tv_penalty, oob, t (ns at the end of the segment), amps (K,) rad/ns.
        """
        require_x64("GateEnv.step")
        del key, params
        cfg = self.config
        action = jnp.clip(jnp.asarray(action, dtype=jnp.float64), -1.0, 1.0)
        requested = state.amps[-1] + jnp.cumsum(action * cfg.delta_per_action)
        excess = jnp.sum(normalised_excess(requested, cfg.amp_bound))
        oob = excess > 0
        amps = jnp.clip(requested, -cfg.amp_bound, cfg.amp_bound)

        sectors, _ = propagate_samples(state.sectors, state.drift_blocks, amps, cfg.dt, self.plan)
        metrics = state_metrics(sectors, cfg.objective, cfg.concurrence_weight, cfg.unitarity_weight)
        tv = cfg.tv_penalty_scale * jnp.sum(jnp.abs(jnp.diff(amps)))  # within the segment only
        reward, truncated = segment_reward(cfg, metrics.JT, tv, excess, state.idx)

        idx = state.idx + cfg.n_time_steps
        terminated = idx + cfg.n_time_steps - 1 >= cfg.pulse_length
        obs = self._observe(sectors, amps, state.idx)  # time feature before the advance (v1)
        new_state = state._replace(sectors=sectors, amps=amps, idx=idx)
        info = {
            "JT": metrics.JT,
            "concurrence": metrics.concurrence,
            "unitarity": metrics.unitarity,
            "tv_penalty": tv,
            "oob": oob,
            "t": idx * cfg.dt,
            "amps": amps,
        }
        return obs, new_state, reward, terminated, truncated, info

    def step_autoreset(self, key: jax.Array, state: EnvState, action: jnp.ndarray, params: EnvParams):
        """``step``, then restart a finished episode in place.

        The new episode's device is drawn afresh (``resample_drift``) or kept (fixed drift: every
        drifted quantity persists). ``info["final_obs"]`` is the finished episode's last
        observation (equal to ``obs`` while the episode runs), for truncation bootstrapping.
        """
        obs, state, reward, terminated, truncated, info = self.step(key, state, action, params)
        if self.config.resample_drift:
            reset_obs, reset_state = self.reset(key, params)
        else:
            reset_obs, reset_state = self.reset_to(state.device)
        done = terminated | truncated
        info = dict(info, final_obs=obs)
        state = jax.tree.map(lambda new, old: jnp.where(done, new, old), reset_state, state)
        obs = jnp.where(done, reset_obs, obs)
        return obs, state, reward, terminated, truncated, info

    # ---- helpers --------------------------------------------------------------------------

    def _observe(self, sectors: SectorState, amps: jnp.ndarray, idx: jnp.ndarray) -> jnp.ndarray:
        cfg = self.config
        z = jnp.concatenate([sectors.psi1[:, 0], sectors.psi1[:, 1], sectors.psi2])
        pairs = jnp.stack([2.0 * jnp.abs(z) - 1.0, jnp.angle(z) / jnp.pi], axis=-1).reshape(-1)
        time = 2.0 * idx / cfg.pulse_length - 1.0
        obs = jnp.concatenate([pairs, amps / cfg.amp_bound, jnp.reshape(time, (1,))])
        return cfg.obs_scale * obs


def make(**options) -> GateEnv:
    """Build the functional gate environment from ``EnvConfig`` keyword options.

    ``make()`` is the paper's MDP; e.g. ``make(oob_mode="clip", qubit_drift_mhz="recool")``.
    Unknown options raise a ValueError listing the known ones.
    """
    return GateEnv(EnvConfig.from_options(**options))
