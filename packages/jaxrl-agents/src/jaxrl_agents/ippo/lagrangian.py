"""IPPO-Lagrangian: IPPO with one Lagrange multiplier per agent for E[episode cost] <= cost_limit.

Costs are read from ``infos[agent]["cost"]`` (missing = 0.0). Per rollout and agent, before the
actor update: if at least one episode completed during the rollout (episodes that started in an
earlier rollout included), the multiplier takes one projected ascent step against the mean completed
undiscounted episodic cost minus `cost_limit` (losses.dual_step, in both paths);
otherwise it is left unchanged rather than learning from a fragment. The update then uses
(A_r - lambda A_c) / (1 + lambda) with separate reward and cost GAE (learn.py).

Diagnostics per agent and rollout (in ``TrainResult.history``):
    mean_cost                raw cost per step of this rollout
    cost_return_budget       mean undiscounted cost of the episodes completed in it (NaN if none)
    constraint_violation     cost_return_budget - cost_limit (NaN if none)
    discounted_cost_return   mean cost lambda-return (the cost critic's target)
    dual_update_applied      whether the multiplier was stepped
    completed_episodes       episodes completed in this rollout
    lagrange_multiplier_used the multiplier of this update (after the dual step)
"""

from __future__ import annotations

from .train import IPPO

__all__ = ["IPPO_Lagrangian"]


class IPPO_Lagrangian(IPPO):  # noqa: N801 (the name the requirement uses)
    """Independent PPO-Lagrangian; same arguments as `IPPO`.

    Config fields of `IPPOLagrangianConfig` (cost_limit, lagrangian_init, lagrangian_lr, lambda_min,
    lambda_max, center_cost_advantage).
    """

    lagrangian = True
    algo_name = "ippo_lag"
