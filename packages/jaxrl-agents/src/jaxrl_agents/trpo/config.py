"""TRPO's hyper-parameters (sb3-contrib semantics), validated before anything is compiled."""

from __future__ import annotations

import dataclasses

from ..common.config import AlgoConfig, cfg_field

__all__ = ["TRPOConfig"]


@dataclasses.dataclass(frozen=True)
class TRPOConfig(AlgoConfig):
    """TRPO hyper-parameters; defaults are the paper's (sb3-contrib defaults)."""

    n_envs: int = cfg_field(4, "pos_int", "parallel environments")
    n_steps: int = cfg_field(2048, "pos_int", "steps per environment per update")
    activation: str = cfg_field("relu", "activation", "hidden activation")
    batch_size: int = cfg_field(128, "pos_int", "critic minibatch size (must divide the rollout)")
    n_critic_updates: int = cfg_field(10, "pos_int", "critic epochs per update")
    target_kl: float = cfg_field(0.01, "pos_float", "KL limit of the actor step")
    cg_max_steps: int = cfg_field(15, "pos_int", "conjugate-gradient iterations")
    cg_damping: float = cfg_field(0.1, "nonneg_float", "damping added to the Fisher matrix")
    cg_residual_tol: float = cfg_field(1e-10, "nonneg_float", "CG stop on squared residual norm")
    line_search_shrinking_factor: float = cfg_field(0.8, "open_unit", "line-search step shrink")
    line_search_max_iter: int = cfg_field(10, "pos_int", "line-search candidates")
    sequential_line_search: bool = cfg_field(
        False, "bool", "evaluate the line-search candidates one at a time and stop at the first "
        "accepted (sb3-contrib's loop: the same rule, fewer actor passes when an early candidate "
        "passes, last-bit differences in the objective and KL); off: all at once (vmap), the "
        "paper runs' bits")
    normalize_advantage: bool = cfg_field(True, "bool", "normalise advantages over the rollout")

    def _check_consistency(self) -> None:
        super()._check_consistency()
        if self.rollout_size % self.batch_size:
            raise ValueError(
                f"batch_size: expected a divisor of the rollout n_envs * n_steps = "
                f"{self.rollout_size}, got {self.batch_size}")

    # TRPO's `batch_size` is the critic minibatch (SB3's name), not the rollout size.
    @property
    def n_minibatches(self) -> int:
        """Critic minibatches per epoch: rollout_size // batch_size."""
        return self.rollout_size // self.batch_size
