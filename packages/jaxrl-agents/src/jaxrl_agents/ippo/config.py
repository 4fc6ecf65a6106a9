"""Validated configurations of IPPO and IPPO-Lagrangian.

Their fields are PPO's, declared once: the rollout fields of `common.config.RolloutConfig` and the
learning step's of `ppo.config.PPOLossConfig`; IPPO only changes four defaults and adds
``anneal_lr`` (and IPPO-Lagrangian its multiplier). Validation is the same machinery as PPO's and
TRPO's, in Python before anything is compiled; every float must be finite.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ..common.config import RolloutBudget, RolloutConfig, cfg_field
from ..ppo.config import PPOLossConfig

__all__ = ["IPPOConfig", "IPPOLagrangianConfig", "validate_ippo_config", "IPPOTrainConfig",
           "IPPOLagrangianTrainConfig"]


@dataclasses.dataclass(frozen=True)
class IPPOConfig(PPOLossConfig, RolloutConfig):
    """IPPO hyper-parameters (per agent; every agent has its own networks and optimiser).

    A rollout is `n_steps` parallel-environment steps (each gives one transition per agent) in each
    of `n_envs` environments. `IPPO.train` steps one PettingZoo ParallelEnv (``n_envs = 1``); the
    trainer compiles `n_envs` copies of a functional multi-agent core.
    """

    n_envs: int = cfg_field(1, "pos_int", "parallel environments (1 for a PettingZoo ParallelEnv)")
    hidden: tuple = cfg_field((64, 64), "hidden", "hidden layer widths (actor and critic)")
    n_epochs: int = cfg_field(4, "pos_int", "passes over each rollout")
    n_minibatches: int = cfg_field(4, "pos_int",
                                   "minibatches per epoch (reduced to the largest divisor of the "
                                   "rollout length if it does not divide it)")
    anneal_lr: bool = cfg_field(True, "bool",
                                "anneal the learning rate linearly to 0 over the exact number of "
                                "optimiser applications")


@dataclasses.dataclass(frozen=True)
class IPPOLagrangianConfig(IPPOConfig):
    """IPPO plus one Lagrange multiplier per agent for the constraint E[episode cost] <= cost_limit.

    lambda <- clip(lambda + lagrangian_lr * (mean completed episodic cost - cost_limit),
    lambda_min, lambda_max), once per rollout, before the actor update, and only if at least one
    episode completed in that rollout.
    """

    cost_limit: float = cfg_field(25.0, "nonneg_float",
                                  "budget on the undiscounted cost of a completed episode")
    lagrangian_init: float = cfg_field(0.0, "nonneg_float", "initial Lagrange multiplier")
    lagrangian_lr: float = cfg_field(0.05, "pos_float", "dual ascent step size")
    lambda_min: float = cfg_field(0.0, "nonneg_float", "lower clamp of the multiplier")
    lambda_max: float = cfg_field(100.0, "pos_float", "upper clamp of the multiplier")
    center_cost_advantage: bool = cfg_field(True, "bool", "subtract the mean of the cost advantages")

    def _check_consistency(self) -> None:
        if self.lambda_min > self.lambda_max:
            raise ValueError(f"lambda_min: expected at most lambda_max={self.lambda_max}, got "
                             f"{self.lambda_min}")
        if not self.lambda_min <= self.lagrangian_init <= self.lambda_max:
            raise ValueError(f"lagrangian_init: expected a value in [lambda_min, lambda_max] = "
                             f"[{self.lambda_min}, {self.lambda_max}], got {self.lagrangian_init}")


def validate_ippo_config(cfg: Mapping | IPPOConfig | None = None, *,
                         lagrangian: bool = False) -> IPPOConfig:
    """Validated IPPO (``lagrangian=True``: IPPO-Lagrangian) config.

    From None (the defaults), a mapping of fields or a config object (`ValidatedConfig.coerce`;
    ValueError names the field).
    """
    return (IPPOLagrangianConfig if lagrangian else IPPOConfig).coerce(cfg, "cfg")


# ------------------------------------------------------------------ the trainer's configs
# run/trainer.py runs every algorithm from one config object that also carries the budget
# (``total_steps``), as PPO's and TRPO's do. IPPO's own API keeps the budget out of the config
# (``IPPO(cfg, seed).train(env, timesteps)``), so the trainer's configs are subclasses that add it;
# nothing but the trainer's loop reads it.
_TOTAL_STEPS = cfg_field(20_000, "pos_int",
                         "environment steps to train for (compiled: rounded down to whole updates)")


@dataclasses.dataclass(frozen=True)
class IPPOTrainConfig(RolloutBudget, IPPOConfig):
    """`IPPOConfig` plus the run's budget ``total_steps`` (what `run.trainer.train` takes)."""

    total_steps: int = _TOTAL_STEPS


@dataclasses.dataclass(frozen=True)
class IPPOLagrangianTrainConfig(RolloutBudget, IPPOLagrangianConfig):
    """`IPPOLagrangianConfig` plus the run's budget ``total_steps``."""

    total_steps: int = _TOTAL_STEPS

