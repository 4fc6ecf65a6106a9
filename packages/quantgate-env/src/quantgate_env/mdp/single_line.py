"""The gate environment as pure functions (the functional step contract of docs/contracts.md).

``GateEnv`` is a frozen, hashable dataclass (pass it as a static argument to ``jax.jit``); its
methods are pure functions of explicit pytrees, jit- and vmap-able:

    reset(key, params)                -> obs, state
    step(key, state, action, params)  -> obs, state, reward, terminated, truncated, info
    step_autoreset(key, state, action, params)   (finished episodes restart inside;
                                                   info["final_obs"] keeps their last observation)

By default it is the paper run's MDP step for step (spec 3); see ``EnvConfig`` for the switches.
``GateEnv`` is a view of the one core (``quantgate_env.mdp.core.GateCore``) with the coupler line alone.
The physics is float64 by default: trace these functions under ``jax.enable_x64(True)``; with
``precision="float32"`` every array is float32 and no x64 is needed.
"""

from __future__ import annotations

import dataclasses

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from ..physics.propagation import TaylorPlan
from ..validation import check_action_shape, instance_of
from .config import EnvConfig, MultiGateConfig
from .core import CoreState, EnvParams
from .evaluation import GateEvaluation
from .plan import lines_plan
from .view import CoreView

__all__ = ["EnvParams", "EnvState", "GateEnv", "make", "observation_layout"]

#: The state of ``GateEnv``: the core's state with one line (``amps`` is (1, K)).
EnvState = CoreState

# Entries of the core's info that the single-line environment reports (the rest concern several
# lines or the leakage cost of the multi-actuator environment).
_SINGLE_INFO = ("JT", "concurrence", "unitarity", "tv_penalty", "oob", "t")


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


@dataclasses.dataclass(frozen=True)
class GateEnv(CoreView):
    """The perfect-entangler gate environment (functional core, the coupler line alone).

    A view of ``core.GateCore`` with ``actuators=("coupler",)``: (K,) actions, (obs_dim,)
    observations, the single-line info. A step on a finished episode returns it frozen inside
    ``jit`` (same state and observation, reward 0, flags set) and raises a RuntimeError when
    called eagerly on a concrete state (``core`` module docstring).

    Attributes:
        config: static configuration.
        plan: static Taylor plan of the exact propagation, covering the amplitude bound and the
            configured drift (computed from the config; do not pass by hand).
    """

    config: EnvConfig = EnvConfig()
    plan: TaylorPlan | None = None

    def __post_init__(self):
        instance_of("config", self.config, EnvConfig, "quantgate_env.EnvConfig")
        if self.plan is None:
            object.__setattr__(self, "plan", lines_plan(self._lines_config))

    @property
    def _lines_config(self) -> MultiGateConfig:
        return MultiGateConfig(env=self.config, actuators=("coupler",))

    def _view(self, rows: jnp.ndarray) -> jnp.ndarray:
        return rows[0]

    # ---- static description -------------------------------------------------------------

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
    def evaluation(self):
        """What an agent records and prints of an evaluation episode (docs/contracts.md)."""
        return GateEvaluation()

    # ---- pure functions (reset, reset_to, next_episode, observe: ``view.CoreView``) --------

    def step(self, key: jax.Array, state: EnvState, action: jnp.ndarray, params: EnvParams):
        """Play one segment of K samples.

        Args:
            key: unused by the paper MDP (kept for the contract).
            state: current state (a finished one is returned frozen, see the class docstring).
            action: (K,) real amplitude deltas in units of ``delta_per_action``; clipped to [-1, 1].
            params: environment parameters (the device in use is ``state.device``).

        Returns:
            obs (obs_dim,), state, reward (), terminated () bool (the pulse ended), truncated ()
            bool (out of bounds in terminate mode), info dict: JT, concurrence, unitarity,
            tv_penalty, oob, t (ns at the end of the segment), amps (K,) rad/ns.
        """
        check_action_shape("action", action, (self.config.n_time_steps,), integer=False)
        obs, state, reward, terminated, truncated, info = self.core.step(key, state, (action,), params, "GateEnv.step")
        return obs[0], state, reward, terminated, truncated, _single_info(info)

    def step_autoreset(self, key: jax.Array, state: EnvState, action: jnp.ndarray, params: EnvParams):
        """``step``, then restart a finished episode in place (``next_episode``).

        The new episode's device is drawn afresh (``resample_drift``) or kept (fixed drift: every
        drifted quantity persists). ``info["final_obs"]`` is the finished episode's last
        observation (equal to ``obs`` while the episode runs), for truncation bootstrapping.
        """
        check_action_shape("action", action, (self.config.n_time_steps,), integer=False)
        obs, state, reward, terminated, truncated, info = self.core.step_autoreset(
            key, state, (action,), params, "GateEnv.step_autoreset")
        return obs[0], state, reward, terminated, truncated, dict(_single_info(info), final_obs=info["final_obs"][0])


def _single_info(info: dict) -> dict:
    """The core's one-line info as the single-line environment reports it."""
    return {**{key: info[key] for key in _SINGLE_INFO}, "amps": info["amps"][0]}


def make(**options) -> GateEnv:
    """Build the functional gate environment from ``EnvConfig`` keyword options.

    ``make()`` is the paper's MDP; e.g. ``make(oob_mode="clip", qubit_drift_mhz="recool")``.
    Unknown options raise a ValueError listing the known ones.
    """
    return GateEnv(EnvConfig.from_options(**options))
