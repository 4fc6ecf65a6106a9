"""One agent's IPPO / IPPO-Lagrangian update as a pure function.

Shared by the Python-stepped and the compiled trainers (and vmapped over agents that share a
network definition).

The update takes a rollout of one agent with leading axes (T, N) (time, environments), evaluates
V(obs_t) and V(next_obs_t) with the critic that collected it (parameters are unchanged between
collection and update, so these are the collection-time values), runs GAE with separate terminated
and done flags (common.gae.gae_next_values), and applies `n_epochs` passes of PPO minibatch steps with the
shared clipped-surrogate loss (common.losses.ppo_loss).

IPPO-Lagrangian adds a cost critic (same MLP definition, its own parameters ``params["cost_critic"]``)
trained on cost lambda-returns, and replaces the policy advantage by
(A_r - lambda A_c) / (1 + lambda), with A_r standardised over the whole rollout and A_c
mean-centred (losses.py); the multiplier is updated beforehand by `losses.dual_update`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ..common.gae import gae_next_values
from ..common.losses import ppo_loss, value_loss
from ..common.minibatch import minibatch_epochs
from ..common.optimizer import apply_adam, linear_lr, make_optimizer
from ..common.rollout import flatten_time_env
from .config import IPPOConfig
from .losses import lagrangian_advantage
from .rollout import stack_params

__all__ = ["init_agent_params", "init_group_state", "make_agent_update", "minibatch_count",
           "optimizer_applications", "steps_per_update"]


def minibatch_count(batch_size: int, requested: int) -> int:
    """Largest divisor of `batch_size` not above `requested`: the minibatch count actually used.

    It differs from `requested` when a rollout of `batch_size` transitions cannot be split into
    `requested` equal minibatches.
    """
    for d in range(min(requested, batch_size), 0, -1):
        if batch_size % d == 0:
            return d
    return 1


def optimizer_applications(rollout_sizes, n_epochs: int, n_minibatches: int) -> int:
    """Exact number of optimiser steps of a run whose rollouts have the given transition counts.

    It is the denominator of the learning-rate annealing.
    """
    return sum(n_epochs * minibatch_count(int(n), n_minibatches) for n in rollout_sizes)


def init_agent_params(model, key: jax.Array, lagrangian: bool) -> dict:
    """``{"actor", "critic"}`` (+ ``"cost_critic"`` with the critic's definition for IPPO-Lagrangian)."""
    k_main, k_cost = jax.random.split(key)
    params = model.init(k_main)
    if lagrangian:
        params["cost_critic"] = model.init(k_cost)["critic"]
    return params


def init_group_state(agent_spaces, agents, groups, key: jax.Array, cfg: IPPOConfig, lagrangian: bool):
    """Independent initial parameters per agent, and each group's optimiser state.

    Agent i's parameters come from ``fold_in(key, i)``; they are stacked per group of agents with
    equal shapes.

    Shared by the Python and compiled paths, so the same seed gives the same initial parameters.

    Returns:
        (group_params, group_opt): lists aligned with ``groups``.
    """
    tx = make_optimizer(cfg.adam_eps, cfg.max_grad_norm)
    params = {a: init_agent_params(agent_spaces[a].model, jax.random.fold_in(key, i), lagrangian)
              for i, a in enumerate(agents)}
    group_params = [stack_params([params[a] for a in g.agents]) for g in groups]
    return group_params, [jax.vmap(tx.init)(p) for p in group_params]


def make_agent_update(model, cfg: IPPOConfig, lagrangian: bool):
    """Build one agent's update function (pure; jit it, vmap it over agents with the same network).

    The function is ``update(params, opt_state, batch, lam, key, step0, total_steps) -> (params,
    opt_state, stats)``.

    Args of the returned function:
        params: the agent's parameters (`init_agent_params`).
        opt_state: its optimiser state.
        batch: dict of (T, N, ...) arrays: obs, next_obs (obs_dim), action, logp, reward,
            terminated, done, optionally mask (n_outputs) and (Lagrangian) cost.
        lam: () multiplier used in this update (ignored without `lagrangian`).
        key: PRNG key for the minibatch permutations.
        step0: () int, optimiser applications done before this update.
        total_steps: () int, optimiser applications of the whole run (annealing denominator).

    Stats (scalars): pg_loss, v_loss, entropy, approx_kl, clip_frac (means over minibatches), lr
    (last step), and for IPPO-Lagrangian cost_v_loss and discounted_cost_return (mean cost
    lambda-return, the cost critic's target).
    """
    # Global-norm clipping + Adam, as PPO (learning rate applied per step below).
    tx = make_optimizer(cfg.adam_eps, cfg.max_grad_norm)

    def update(params, opt_state, batch, lam, key, step0, total_steps):
        t, n = batch["reward"].shape[:2]
        size = t * n
        n_mb = minibatch_count(size, cfg.n_minibatches)  # static: shapes are known at trace time
        value = lambda p, o: model.value(p, o)  # noqa: E731 (critic and cost critic share it)
        adv, ret = gae_next_values(batch["reward"], value(params["critic"], batch["obs"]),
                                   value(params["critic"], batch["next_obs"]), batch["terminated"],
                                   batch["done"], cfg.gamma, cfg.gae_lambda)
        data = {"obs": batch["obs"], "action": batch["action"], "logp": batch["logp"], "ret": ret}
        if "mask" in batch:
            data["mask"] = batch["mask"]
        extra: dict[str, Any] = {}
        if lagrangian:
            adv_c, ret_c = gae_next_values(
                batch["cost"], value(params["cost_critic"], batch["obs"]),
                value(params["cost_critic"], batch["next_obs"]), batch["terminated"], batch["done"],
                cfg.gamma, cfg.gae_lambda)
            adv = lagrangian_advantage(adv, adv_c, lam, cfg.center_cost_advantage)
            data["ret_c"] = ret_c
            extra["discounted_cost_return"] = ret_c.mean()
        data["adv"] = adv
        data = jax.tree_util.tree_map(flatten_time_env, data)
        # IPPO-Lagrangian standardises A_r over the whole rollout before mixing in the cost; a
        # second per-minibatch normalisation would undo the lambda weighting.
        per_mb_norm = cfg.normalize_advantage and not lagrangian

        def loss_fn(p, mb):
            loss, stats = ppo_loss(model, p, mb, cfg.clip_eps, cfg.vf_coef, cfg.ent_coef,
                                   per_mb_norm)
            if lagrangian:
                c_loss = value_loss(model, p["cost_critic"], mb["obs"], mb["ret_c"])
                loss = loss + cfg.vf_coef * c_loss
                stats = {**stats, "cost_v_loss": c_loss}
            return loss, stats

        def minibatch(carry, mb, e, m):
            p, o = carry
            step = step0 + e * n_mb + m
            frac = jnp.asarray(step, jnp.float32) / jnp.asarray(total_steps, jnp.float32)
            lr = linear_lr(cfg.lr, frac) if cfg.anneal_lr else jnp.float32(cfg.lr)
            (_, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, mb)
            p, o = apply_adam(tx, grads, o, p, lr)
            return (p, o), {**stats, "lr": lr}

        (params, opt_state), stats = minibatch_epochs(minibatch, (params, opt_state), data, key,
                                                      cfg.n_epochs, n_mb)
        lr_last = stats.pop("lr")[-1, -1]
        stats = {k: v.mean() for k, v in stats.items()}
        stats["lr"] = lr_last
        stats.update(extra)
        return params, opt_state, stats

    return update


def steps_per_update(size: int, cfg: IPPOConfig) -> int:
    """Optimiser applications of one update over `size` transitions."""
    return cfg.n_epochs * minibatch_count(size, cfg.n_minibatches)
