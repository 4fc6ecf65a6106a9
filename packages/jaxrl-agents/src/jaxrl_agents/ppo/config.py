"""PPO's hyper-parameters, validated in Python before anything is compiled."""

from __future__ import annotations

import dataclasses
import math

from ..common.config import AlgoConfig, ValidatedConfig, cfg_field

__all__ = ["PPOConfig", "PPOLossConfig"]


@dataclasses.dataclass(frozen=True)
class PPOLossConfig(ValidatedConfig):
    """PPO's learning-step fields: epochs, minibatches and the clipped loss (IPPO's too)."""

    n_epochs: int = cfg_field(10, "pos_int", "passes over each rollout")
    n_minibatches: int = cfg_field(32, "pos_int", "minibatches per epoch (must divide the batch)")
    clip_eps: float = cfg_field(0.2, "pos_float", "PPO clip range epsilon")
    vf_coef: float = cfg_field(0.5, "nonneg_float", "value-loss coefficient")
    ent_coef: float = cfg_field(0.0, "nonneg_float", "entropy bonus coefficient")
    max_grad_norm: float = cfg_field(0.5, "pos_float", "global gradient-norm clip")
    normalize_advantage: bool = cfg_field(True, "bool", "normalise advantages per minibatch")


@dataclasses.dataclass(frozen=True)
class PPOConfig(PPOLossConfig, AlgoConfig):
    """PPO hyper-parameters; defaults are the project's PPO runs."""

    target_kl: float = cfg_field(math.inf, "pos_float_or_inf",
                                 "skip the rest of an update once a minibatch starts with approx KL "
                                 "> 1.5 x this (SB3 semantics); inf = never")

    def _check_consistency(self) -> None:
        super()._check_consistency()
        if self.rollout_size % self.n_minibatches:
            raise ValueError(
                f"n_minibatches: expected a divisor of the batch n_envs * n_steps = "
                f"{self.rollout_size}, got {self.n_minibatches}")

    @property
    def minibatch_size(self) -> int:
        """Transitions per minibatch: rollout_size // n_minibatches."""
        return self.rollout_size // self.n_minibatches

    @property
    def n_grad_steps(self) -> int:
        """Gradient steps over the whole run (the denominator of the learning-rate decay)."""
        return self.n_updates * self.n_epochs * self.n_minibatches
