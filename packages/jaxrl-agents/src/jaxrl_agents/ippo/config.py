"""Validated configurations of IPPO and IPPO-Lagrangian.

Same machinery as the PPO/TRPO configs (common.config.ValidatedConfig and cfg_field: a validation rule and a CLI help string
per field, checked in Python before anything is compiled), with the multi-agent fields. As there,
every float must be finite: an infinite learning rate or cost limit is always a typo.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ..common.config import RolloutBudget, ValidatedConfig, cfg_field

__all__ = ["IPPOConfig", "IPPOLagrangianConfig", "validate_ippo_config", "IPPOTrainConfig",
           "IPPOLagrangianTrainConfig", "algorithm_config"]


@dataclasses.dataclass(frozen=True)
class IPPOConfig(ValidatedConfig):
    """IPPO hyper-parameters (per agent; every agent has its own networks and optimiser).

    A rollout is `n_steps` parallel-environment steps (each gives one transition per agent) in each
    of `n_envs` environments. The Python trainer steps one PettingZoo ParallelEnv (``n_envs = 1``);
    the compiled trainer runs `n_envs` copies of a functional multi-agent core.
    """

    n_envs: int = cfg_field(1, "pos_int", "parallel environments (1 for a PettingZoo ParallelEnv)")
    n_steps: int = cfg_field(128, "pos_int", "environment steps per rollout")
    n_epochs: int = cfg_field(4, "pos_int", "passes over each rollout")
    n_minibatches: int = cfg_field(4, "pos_int",
                                   "minibatches per epoch (reduced to the largest divisor of the "
                                   "rollout length if it does not divide it)")
    lr: float = cfg_field(3e-4, "pos_float", "initial Adam learning rate")
    anneal_lr: bool = cfg_field(True, "bool",
                                "anneal the learning rate linearly to 0 over the exact number of "
                                "optimiser applications")
    gamma: float = cfg_field(0.99, "unit_interval", "discount factor")
    gae_lambda: float = cfg_field(0.95, "unit_interval", "GAE lambda")
    clip_eps: float = cfg_field(0.2, "pos_float", "PPO clip range epsilon")
    vf_coef: float = cfg_field(0.5, "nonneg_float", "value-loss coefficient")
    ent_coef: float = cfg_field(0.0, "nonneg_float", "entropy bonus coefficient")
    max_grad_norm: float = cfg_field(0.5, "pos_float", "global gradient-norm clip")
    adam_eps: float = cfg_field(1e-5, "pos_float", "Adam epsilon")
    normalize_advantage: bool = cfg_field(True, "bool", "standardise advantages per minibatch")
    hidden: tuple = cfg_field((64, 64), "hidden", "hidden layer widths (actor and critic)")
    activation: str = cfg_field("tanh", "activation", "hidden activation")


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
    """Validated IPPO (or, with ``lagrangian=True``, IPPO-Lagrangian) configuration.

    Args:
        cfg: None (all defaults), a mapping of field -> value (missing fields take their defaults)
            or a config object.
        lagrangian: validate against `IPPOLagrangianConfig` instead of `IPPOConfig`.

    Returns:
        The frozen config object.

    Raises:
        ValueError: unknown keys, wrong types, non-finite values, values out of range,
            non-positive sizes, unsupported activations, malformed hidden widths.
    """
    cls = IPPOLagrangianConfig if lagrangian else IPPOConfig
    if cfg is None:
        return cls()
    if isinstance(cfg, IPPOConfig):
        if lagrangian and not isinstance(cfg, IPPOLagrangianConfig):
            cfg = cfg.to_dict()
        else:
            return cfg
    if not isinstance(cfg, Mapping):
        raise ValueError(f"cfg: expected a mapping of config fields or None, got {type(cfg).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(str(k) for k in set(cfg) - names)
    if unknown:
        raise ValueError(f"cfg: unknown keys {unknown} for {cls.__name__}; valid keys: {sorted(names)}")
    return cls(**dict(cfg))


# ------------------------------------------------------------------ the trainer's configs
# run/trainer.py runs every algorithm from one config object that also carries the budget
# (``total_steps``), as PPO's and TRPO's do. IPPO's own API keeps the budget out of the config
# (``IPPO(cfg, seed).train(env, timesteps)``), so the trainer's configs are subclasses that add it;
# `algorithm_config` strips it again for the compiled programs, whose shapes do not depend on it
# (a resume that extends the budget reuses the compiled update).
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


def algorithm_config(cfg: IPPOConfig) -> IPPOConfig:
    """The algorithm's own config (`IPPOConfig` / `IPPOLagrangianConfig`) without the budget."""
    if isinstance(cfg, (IPPOTrainConfig, IPPOLagrangianTrainConfig)):
        base = IPPOLagrangianConfig if isinstance(cfg, IPPOLagrangianConfig) else IPPOConfig
        d = cfg.to_dict()
        d.pop("total_steps")
        return base(**d)
    return cfg
