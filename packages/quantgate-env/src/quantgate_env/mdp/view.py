"""What the single- and multi-line environments share: a view of the one core.

``GateEnv`` (the coupler line alone) and ``MultiGateEnv`` (one agent per line) are frozen
dataclasses over the same ``core.GateCore``; they differ only in how they shape the core's per-line
arrays (one (obs_dim,) row; a dict keyed by agent) and in their step's actions and infos. The
pass-throughs that are the same for both are defined here, once: the core itself, the episode
length, the parameters, and reset, reset_to, next_episode and observe.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from ..physics.device import DeviceParams
from .config import MultiGateConfig
from .core import CoreState, EnvParams, GateCore

__all__ = ["CoreView"]


class CoreView:
    """Base of ``GateEnv`` and ``MultiGateEnv``: the pass-throughs to their ``GateCore``.

    A subclass is a frozen dataclass with ``config`` and ``plan`` fields and defines
    ``_lines_config`` (the core's ``MultiGateConfig``) and ``_view`` (the core's per-line rows,
    (n_lines, ...), in the subclass's public shape). Error messages name the subclass
    (``GateEnv.reset``, ``MultiGateEnv.reset``).
    """

    @property
    def _lines_config(self) -> MultiGateConfig:
        raise NotImplementedError

    def _view(self, rows: jnp.ndarray):
        raise NotImplementedError

    @functools.cached_property
    def core(self) -> GateCore:
        """The ``GateCore`` this environment is a view of."""
        return GateCore(self._lines_config, self.plan)

    # ---- static description -------------------------------------------------------------

    @property
    def max_episode_steps(self) -> int:
        """Steps of a full episode (333 for the paper)."""
        return self._lines_config.env.n_steps

    @property
    def requires_x64(self) -> bool:
        """Whether callers must trace this environment under JAX's x64 mode (docs/contracts.md).

        True for the default ``precision="float64"`` physics, False for ``"float32"``.
        """
        return self.core.requires_x64

    @property
    def default_params(self) -> EnvParams:
        """Training parameters: the nominal device with the configured drift half-widths.

        Numpy arrays in the configured precision; works inside ``jit``.
        """
        return self.core.default_params

    @property
    def eval_params(self) -> EnvParams:
        """Evaluation parameters: the nominal device, no drift (numpy; works inside ``jit``)."""
        return self.core.eval_params

    # ---- pure functions -------------------------------------------------------------------

    def reset(self, key: jax.Array, params: EnvParams):
        """Start an episode on a device drawn from ``params`` (the nominal one without drift).

        Returns:
            obs (``GateEnv``: (obs_dim,); ``MultiGateEnv``: {agent: (obs_dim,)}) and the state.
        """
        obs, state = self.core.reset(key, params, f"{type(self).__name__}.reset")
        return self._view(obs), state

    def reset_to(self, device: DeviceParams):
        """Start an episode on exactly this device (no randomness); returns obs and state as ``reset``."""
        obs, state = self.core.reset_to(device, f"{type(self).__name__}.reset_to")
        return self._view(obs), state

    def next_episode(self, key: jax.Array, state: CoreState, params: EnvParams):
        """Start the episode that follows ``state``'s (``GateCore.next_episode``).

        The next episode gets a fresh device with ``resample_drift``, else the same one.
        """
        obs, state = self.core.next_episode(key, state, params)
        return self._view(obs), state

    def observe(self, state: CoreState):
        """The observation of ``state`` (what the step or reset that made it returned)."""
        return self._view(self.core.observe(state))
