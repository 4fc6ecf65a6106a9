"""IPPO-Lagrangian's own pieces: the dual ascent on the multipliers and the mixed advantage.

The projected dual ascent on the multipliers, and the policy advantage that mixes reward and cost
(the clipped surrogate itself is common.losses.ppo_loss).

Both trainers (Python-stepped, compiled) use `dual_step`, so the multiplier update and its
diagnostics are defined once.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..common.losses import standardize
from .config import IPPOLagrangianConfig

__all__ = ["dual_step", "lagrangian_advantage"]


def dual_step(lam: jax.Array, episode_cost_sum: jax.Array, completed: jax.Array,
              cfg: IPPOLagrangianConfig) -> tuple[jax.Array, dict]:
    """Projected dual ascent on one multiplier per agent, only where an episode completed.

    Args:
        lam: (A,) current multipliers.
        episode_cost_sum: (A,) sum over the episodes completed in this rollout of their undiscounted
            episodic cost.
        completed: (A,) number of episodes completed in this rollout.
        cfg: IPPO-Lagrangian config (cost_limit, lagrangian_lr, lambda_min, lambda_max).

    Returns:
        (new lambda (A,) float32, the per-agent diagnostics both trainers record, (A,) arrays:
        ``cost_return_budget`` (mean completed episodic cost, NaN if none),
        ``constraint_violation`` (that minus cost_limit, NaN if none), ``dual_update_applied``,
        ``completed_episodes`` and ``lagrange_multiplier_used`` (the new lambda, which this
        rollout's update uses)).
    """
    completed = jnp.asarray(completed)
    applied = completed > 0
    budget = jnp.where(applied, episode_cost_sum / jnp.maximum(completed, 1), jnp.nan)
    violation = budget - cfg.cost_limit
    stepped = jnp.clip(lam + cfg.lagrangian_lr * jnp.where(applied, violation, 0.0),
                       cfg.lambda_min, cfg.lambda_max)
    new = jnp.where(applied, stepped, lam).astype(jnp.float32)
    return new, {"cost_return_budget": budget, "constraint_violation": violation,
                 "dual_update_applied": applied, "completed_episodes": completed,
                 "lagrange_multiplier_used": new}


def lagrangian_advantage(adv_r: jax.Array, adv_c: jax.Array, lam: jax.Array,
                         center_cost: bool = True) -> jax.Array:
    """Policy advantage of IPPO-Lagrangian: (A_r' - lambda A_c') / (1 + lambda).

    A_r' is A_r standardised over the whole rollout, (A_r - mean) / (std + 1e-8); A_c' is A_c
    mean-centred (or unchanged with ``center_cost=False``). Dividing by 1 + lambda keeps the
    advantage scale bounded as lambda grows, so the PPO clip range keeps its meaning.

    Args:
        adv_r: reward advantages A_r, any shape.
        adv_c: cost advantages A_c, the shape of `adv_r`.
        lam: () multiplier (>= 0).
        center_cost: subtract the mean of A_c.
    """
    adv_r = standardize(adv_r)
    if center_cost:
        adv_c = adv_c - adv_c.mean()
    return (adv_r - lam * adv_c) / (1.0 + lam)
