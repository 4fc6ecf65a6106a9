"""Static configuration of the gate environment: a frozen, hashable dataclass checked at construction.

Defaults reproduce the paper run's MDP (spec 3): 1000 samples of 50 ps, K = 3 samples per step,
333 steps, deltas of 20 rad/ns per unit action, |u| <= 20 rad/ns, reward offset -log10(0.99).
Every switch beyond the paper (drift, out-of-bounds handling, objective) defaults to off.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..physics.drift import DRIFT_RANGES
from ..physics.hamiltonian import CONTROL_LINES
from ..physics.metrics import OBJECTIVES
from ..validation import choice, finite_number, instance_of

__all__ = ["ACTION_MODES", "EnvConfig", "MultiGateConfig", "OOB_MODES", "PRECISIONS", "PROPAGATIONS",
           "QUBIT_AMP_BOUND"]

OOB_MODES = ("terminate", "clip")
#: ``precision``: "float64" (the default; needs JAX's x64 mode) or "float32" (every array float32,
#: traceable inside a float32 program; J_T errs by ~1e-7 to 1e-6, see the README's Precision).
PRECISIONS = ("float64", "float32")
ACTION_MODES = ("continuous", "discrete")
#: ``propagation``: "exact" (the default: the series every earlier run was computed with, bit for
#: bit) or "fast" (the same series unrolled with element-wise products, ``fast_propagation``: equal
#: to rounding, ~1e-15 per sample, but not bit for bit; for new campaigns).
PROPAGATIONS = ("exact", "fast")

#: Default qubit-line amplitude bound, rad/ns: 2 pi x 0.3 GHz. Flux-tuned transmons in
#: Sycamore-class chips make excursions of a few hundred MHz during two-qubit gates; going further
#: costs dephasing (flux-noise sensitivity grows away from the sweet spot) and flux-line
#: bandwidth. With +-0.3 GHz on each qubit the qubit-qubit detuning (0.8588 GHz) stays above
#: 0.2588 GHz > |alpha_q1| = 0.235 GHz, so the qubit lines alone cannot cross the |11>-|02>
#: resonance: the coupler remains the gate's engine, the qubit lines trim phases and detunings.
QUBIT_AMP_BOUND = 2.0 * math.pi * 0.3
# Observations are float32 with every entry in [-obs_scale, obs_scale] (a unit-range feature times
# obs_scale): obs_scale must be a normal float32, or the bounds of the observation Box overflow to
# inf (above ~3.4e38) or every feature flushes towards 0 (below ~1.2e-38).
_OBS_SCALE_RANGE = (float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max))


@dataclasses.dataclass(frozen=True)
class EnvConfig:
    """Static environment configuration (shapes, episode length, modes, reward shaping).

    Attributes:
        pulse_length: samples per pulse (1000).
        T: pulse duration in ns (50); the sample length is dt = T / pulse_length.
        n_time_steps: K, samples set per step (3).
        a_scale: rad/ns per unit action and amplitude normaliser (20).
        a_norm_max: bound |u| <= a_norm_max * a_scale (1).
        delta_scale: rad/ns per unit action for the deltas; 0 means a_scale (use 20*3/K for long
            steps so exploration does not hit the bound every step).
        tv_penalty_scale: weight of the within-segment total variation (1e-3 per rad/ns).
        concurrence_weight, unitarity_weight: J_T = 1 - (w_C C + w_U U)/(w_C + w_U) (1, 3).
        terminal_penalty: out-of-bounds reward in terminate mode, scaled by (1 - t_start/T) (-20).
        log_lim: reward offset -log10(1 - log_lim) per step (1e-2, the paper run; 0 allowed).
        rew_scale: multiplies -log10(J_T) and the offset (1).
        obs_scale: multiplies the whole observation (0.9); a normal float32, in [1.2e-38, 3.4e38],
            so that the float32 observations and their Box stay finite.
        jt_floor: J_T floor inside the log (1e-12).
        objective: "pe" (J_T) or "sqrt_iswap" (1 - F with free virtual Z).
        oob_mode: "terminate" (reward replaced by the penalty, episode truncated) or "clip"
            (amplitudes clipped, episode continues, reward minus oob_penalty * excess).
        oob_penalty: lambda of clip mode, per unit of normalised excess.
        max_drift: qubit frequency drift as a fraction (1e-3 = +-0.1 %, the paper's DR).
        qubit_drift_mhz: qubit frequency drift in MHz, or a named range from
            ``DRIFT_RANGES`` ("in_cooldown" 0.1, "recool" 5.7, "fab_targeting" 18.5).
        coupler_drift_mhz: idle coupler frequency drift, MHz.
        g_drift_mhz: coupling drift, MHz (independent per coupling).
        resample_drift: True: a new device at every reset; False: one device per environment
            instance, kept across auto-resets (what v1's domain-randomised env did).
        precision: "float64" (default: the physics needs JAX's x64 mode, exact to ~1e-14) or
            "float32" (every array float32, no x64 needed; sectors re-normalised every sample).
        propagation: "exact" (default: the rolled Taylor series the paper's runs reproduce bit for
            bit) or "fast" (the same series unrolled, element-wise products: faster at small
            batches, equal to rounding but not bit for bit; ``quantgate_env.physics.fast_propagation``).
    """

    pulse_length: int = 1000
    T: float = 50.0
    n_time_steps: int = 3
    a_scale: float = 20.0
    a_norm_max: float = 1.0
    delta_scale: float = 0.0
    tv_penalty_scale: float = 1e-3
    concurrence_weight: float = 1.0
    unitarity_weight: float = 3.0
    terminal_penalty: float = -20.0
    log_lim: float = 1e-2
    rew_scale: float = 1.0
    obs_scale: float = 0.9
    jt_floor: float = 1e-12
    objective: str = "pe"
    oob_mode: str = "terminate"
    oob_penalty: float = 1.0
    max_drift: float = 0.0
    qubit_drift_mhz: float | str = 0.0
    coupler_drift_mhz: float = 0.0
    g_drift_mhz: float = 0.0
    resample_drift: bool = True
    precision: str = "float64"
    propagation: str = "exact"

    def __post_init__(self):
        for name in ("pulse_length", "n_time_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected a positive integer, got {value!r}")
        if self.pulse_length < self.n_time_steps:
            raise ValueError(
                f"pulse_length: expected at least n_time_steps = {self.n_time_steps} samples, got {self.pulse_length}"
            )
        positive = ("T", "a_scale", "a_norm_max", "obs_scale", "jt_floor", "rew_scale")
        non_negative = ("delta_scale", "tv_penalty_scale", "concurrence_weight", "unitarity_weight",
                        "oob_penalty", "max_drift", "coupler_drift_mhz", "g_drift_mhz")
        for name in positive + non_negative + ("terminal_penalty", "log_lim"):
            value = finite_number(name, getattr(self, name))
            if name in positive and value <= 0:
                raise ValueError(f"{name}: expected a positive number, got {value!r}")
            if name in non_negative and value < 0:
                raise ValueError(f"{name}: expected a non-negative number, got {value!r}")
            object.__setattr__(self, name, value)
        low, high = _OBS_SCALE_RANGE
        if not low <= self.obs_scale <= high:
            raise ValueError(
                f"obs_scale: expected a number in [{low:.3g}, {high:.3g}] (observations are float32 in "
                f"[-obs_scale, obs_scale]), got {self.obs_scale!r}"
            )
        if self.concurrence_weight + self.unitarity_weight <= 0:
            raise ValueError("concurrence_weight, unitarity_weight: expected a positive sum, got 0")
        if not 0 <= self.log_lim < 1:
            raise ValueError(f"log_lim: expected a number in [0, 1), got {self.log_lim!r}")
        if self.max_drift >= 1:
            raise ValueError(f"max_drift: expected a fraction below 1, got {self.max_drift!r}")
        choice("objective", self.objective, OBJECTIVES)
        choice("oob_mode", self.oob_mode, OOB_MODES)
        if isinstance(self.qubit_drift_mhz, str):
            choice("qubit_drift_mhz", self.qubit_drift_mhz, tuple(DRIFT_RANGES))
            object.__setattr__(self, "qubit_drift_mhz", DRIFT_RANGES[self.qubit_drift_mhz])
        qubit_mhz = finite_number("qubit_drift_mhz", self.qubit_drift_mhz)
        if qubit_mhz < 0:
            raise ValueError(f"qubit_drift_mhz: expected a non-negative number or one of {tuple(DRIFT_RANGES)}, got {qubit_mhz!r}")
        object.__setattr__(self, "qubit_drift_mhz", qubit_mhz)
        if not isinstance(self.resample_drift, bool):
            raise ValueError(f"resample_drift: expected True or False, got {self.resample_drift!r}")
        choice("precision", self.precision, PRECISIONS)
        choice("propagation", self.propagation, PROPAGATIONS)

    @property
    def dt(self) -> float:
        """Sample duration, ns."""
        return self.T / self.pulse_length

    @property
    def n_steps(self) -> int:
        """Steps per episode: the smallest i with i K + K - 1 >= pulse_length (333 for the paper)."""
        k = self.n_time_steps
        return max(1, math.ceil((self.pulse_length - k + 1) / k))

    @property
    def obs_dim(self) -> int:
        """24 amplitude features + K segment amplitudes + 1 time feature (28 for the paper)."""
        return 24 + self.n_time_steps + 1

    @property
    def amp_bound(self) -> float:
        """|u| bound in rad/ns."""
        return self.a_norm_max * self.a_scale

    @property
    def delta_per_action(self) -> float:
        """rad/ns of amplitude change per unit action."""
        return self.delta_scale if self.delta_scale > 0 else self.a_scale

    @property
    def reward_offset(self) -> float:
        """Per-step offset rew_thresh = -log10(1 - log_lim) * rew_scale (0.0043648 for the paper)."""
        return -math.log10(1.0 - self.log_lim) * self.rew_scale

    @classmethod
    def from_options(cls, **options) -> EnvConfig:
        """Build from keyword options, rejecting unknown names with the list of known ones."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"unknown environment option(s) {unknown}; expected some of {sorted(known)}")
        return cls(**options)


@dataclasses.dataclass(frozen=True)
class MultiGateConfig:
    """Static configuration of an environment with any tuple of control lines (frozen, hashable).

    The single-line environment (``GateEnv``) is ``actuators=("coupler",)``, continuous.

    Attributes:
        env: the pulse, reward shaping, drift, oob mode and precision; the coupler line uses its
            ``a_scale``/``a_norm_max``/``delta_scale``.
        actuators: agents, one per control line, a non-empty tuple of distinct names from
            ``("coupler", "q0", "q1")`` (agent order = this order).
        q0_amp_bound, q1_amp_bound: |u_j| bounds of the qubit lines, rad/ns (``QUBIT_AMP_BOUND``).
        action_mode: "continuous" (Box deltas in [-1, 1]^K) or "discrete" (K level indices).
        n_levels: number of delta levels in discrete mode, odd >= 3 (level 0 = hold).
    """

    env: EnvConfig = EnvConfig()
    actuators: tuple[str, ...] = CONTROL_LINES
    q0_amp_bound: float = QUBIT_AMP_BOUND
    q1_amp_bound: float = QUBIT_AMP_BOUND
    action_mode: str = "continuous"
    n_levels: int = 5

    def __post_init__(self):
        instance_of("env", self.env, EnvConfig, "quantgate_env.EnvConfig")
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
        n = self.n_levels
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 3 or n % 2 == 0:
            raise ValueError(
                f"n_levels: expected an odd integer >= 3 (so that level 0, hold, exists and no mask is empty), got {n!r}"
            )
        object.__setattr__(self, "n_levels", int(n))

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
        adapter = sorted(set(options) & set(ADAPTER_OPTIONS))
        if adapter:
            raise ValueError(
                f"{', '.join(adapter)}: an option of the PettingZoo adapter "
                "(quantgate_env.pettingzoo.parallel_env(...)), not of the functional core; got "
                + ", ".join(f"{k}={options[k]!r}" for k in adapter))
        unknown = sorted(set(options) - own - env_fields)
        if unknown:
            raise ValueError(f"unknown environment option(s) {unknown}; expected some of {sorted(own | env_fields)}")
        env = EnvConfig(**{k: v for k, v in options.items() if k in env_fields})
        return cls(env=env, **{k: v for k, v in options.items() if k in own})


#: Options that change only the PettingZoo adapter (observation dicts, masked-action policy).
ADAPTER_OPTIONS = ("mask_in_obs", "masked_action")
