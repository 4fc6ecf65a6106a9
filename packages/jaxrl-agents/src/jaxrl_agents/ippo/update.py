"""One agent's IPPO / IPPO-Lagrangian update as a pure function, shared by the Python-stepped and the
compiled trainers (and vmapped over agents that share a network definition).

The update takes a rollout of one agent with leading axes (T, N) (time, environments), evaluates
V(obs_t) and V(next_obs_t) with the critic that collected it (parameters are unchanged between
collection and update, so these are the collection-time values), runs GAE with separate terminated
and done flags (gae.gae_next_values), and applies `n_epochs` passes of PPO minibatch steps with the
shared clipped-surrogate loss (ppo.ppo_loss).

IPPO-Lagrangian adds a cost critic (same MLP definition, its own parameters ``params["cost_critic"]``)
trained on cost lambda-returns, and replaces the policy advantage by
(A_r - lambda A_c) / (1 + lambda), with A_r standardised over the whole rollout and A_c
mean-centred; the multiplier is updated beforehand by `dual_update`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from .gae import gae_next_values
from .ippo_config import IPPOConfig, IPPOLagrangianConfig
from .optim import apply_adam, make_adam
from .marl_rollout import stack_params
from .ppo import ppo_loss

__all__ = ["dual_update", "init_agent_params", "lagrangian_advantage", "make_agent_update",
           "make_optimizer", "minibatch_count", "optimizer_applications", "steps_per_update"]


def minibatch_count(batch_size: int, requested: int) -> int:
    """Largest divisor of `batch_size` not above `requested`: the minibatch count actually used when
    a rollout of `batch_size` transitions cannot be split into `requested` equal minibatches."""
    for d in range(min(requested, batch_size), 0, -1):
        if batch_size % d == 0:
            return d
    return 1


def optimizer_applications(rollout_sizes, n_epochs: int, n_minibatches: int) -> int:
    """Exact number of optimiser steps of a run whose rollouts have the given transition counts
    (the denominator of the learning-rate annealing)."""
    return sum(n_epochs * minibatch_count(int(n), n_minibatches) for n in rollout_sizes)


def make_optimizer(cfg: IPPOConfig):
    """Global-norm clipping + Adam (learning rate applied per step by the update)."""
    return make_adam(cfg.adam_eps, cfg.max_grad_norm)


def init_agent_params(model, key: jax.Array, lagrangian: bool) -> dict:
    """``{"actor", "critic"}`` (+ ``"cost_critic"`` with the critic's definition for IPPO-Lagrangian)."""
    k_main, k_cost = jax.random.split(key)
    params = model.init(k_main)
    if lagrangian:
        params["cost_critic"] = model.init(k_cost)["critic"]
    return params


def init_group_state(agent_spaces, agents, groups, key: jax.Array, cfg: IPPOConfig, lagrangian: bool):
    """Independent initial parameters per agent (agent i from ``fold_in(key, i)``), stacked per
    group of agents with equal shapes, and each group's optimiser state.

    Shared by the Python and compiled paths, so the same seed gives the same initial parameters.

    Returns:
        (group_params, group_opt): lists aligned with ``groups``.
    """
    tx = make_optimizer(cfg)
    params = {a: init_agent_params(agent_spaces[a].model, jax.random.fold_in(key, i), lagrangian)
              for i, a in enumerate(agents)}
    group_params = [stack_params([params[a] for a in g.agents]) for g in groups]
    return group_params, [jax.vmap(tx.init)(p) for p in group_params]


def dual_update(lam: jax.Array, episode_cost_sum: jax.Array, completed: jax.Array,
                cfg: IPPOLagrangianConfig) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Projected dual ascent on one multiplier per agent, only where an episode completed.

    Args:
        lam: (A,) current multipliers.
        episode_cost_sum: (A,) sum over the episodes completed in this rollout of their undiscounted
            episodic cost.
        completed: (A,) number of episodes completed in this rollout.
        cfg: IPPO-Lagrangian config (cost_limit, lagrangian_lr, lambda_min, lambda_max).

    Returns:
        (new lambda (A,), cost_return_budget (A,) = mean completed episodic cost (NaN if none),
        constraint_violation (A,) = cost_return_budget - cost_limit (NaN if none)).
    """
    completed = jnp.asarray(completed)
    applied = completed > 0
    budget = jnp.where(applied, episode_cost_sum / jnp.maximum(completed, 1), jnp.nan)
    violation = budget - cfg.cost_limit
    stepped = jnp.clip(lam + cfg.lagrangian_lr * jnp.where(applied, violation, 0.0),
                       cfg.lambda_min, cfg.lambda_max)
    return jnp.where(applied, stepped, lam).astype(jnp.float32), budget, violation


def lagrangian_advantage(adv_r: jax.Array, adv_c: jax.Array, lam: jax.Array,
                         center_cost: bool = True) -> jax.Array:
    """Policy advantage of IPPO-Lagrangian: (A_r' - lambda A_c') / (1 + lambda).

    A_r' is A_r standardised over the whole rollout, (A_r - mean) / (std + 1e-8); A_c' is A_c
    mean-centred (or unchanged with ``center_cost=False``). Dividing by 1 + lambda keeps the
    advantage scale bounded as lambda grows, so the PPO clip range keeps its meaning.

    Args:
        adv_r, adv_c: reward and cost advantages, same shape (any).
        lam: () multiplier (>= 0).
        center_cost: subtract the mean of A_c.
    """
    adv_r = (adv_r - adv_r.mean()) / (adv_r.std() + 1e-8)
    if center_cost:
        adv_c = adv_c - adv_c.mean()
    return (adv_r - lam * adv_c) / (1.0 + lam)


def _flatten_tn(x):
    return x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:])


def make_agent_update(model, cfg: IPPOConfig, lagrangian: bool):
    """Build ``update(params, opt_state, batch, lam, key, step0, total_steps) -> (params, opt_state,
    stats)`` for one agent (pure; jit it, vmap it over agents with the same network).

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
    tx = make_optimizer(cfg)

    def update(params, opt_state, batch, lam, key, step0, total_steps):
        t, n = batch["reward"].shape[:2]
        size = t * n
        n_mb = minibatch_count(size, cfg.n_minibatches)  # static: shapes are known at trace time
        mb_size = size // n_mb
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
        data = jax.tree_util.tree_map(_flatten_tn, data)
        # IPPO-Lagrangian standardises A_r over the whole rollout before mixing in the cost; a
        # second per-minibatch normalisation would undo the lambda weighting.
        per_mb_norm = cfg.normalize_advantage and not lagrangian

        def loss_fn(p, mb):
            loss, stats = ppo_loss(model, p, mb, cfg.clip_eps, cfg.vf_coef, cfg.ent_coef,
                                   per_mb_norm)
            if lagrangian:
                c_loss = ((mb["ret_c"] - value(p["cost_critic"], mb["obs"])) ** 2).mean()
                loss = loss + cfg.vf_coef * c_loss
                stats = {**stats, "cost_v_loss": c_loss}
            return loss, stats

        def epoch(carry, xs):
            k, e = xs
            perm = jax.random.permutation(k, size)
            mbs = jax.tree_util.tree_map(
                lambda x: x[perm].reshape((n_mb, mb_size) + x.shape[1:]), data)

            def minibatch(carry, xs):
                p, o = carry
                mb, m = xs
                step = step0 + e * n_mb + m
                frac = jnp.asarray(step, jnp.float32) / jnp.asarray(total_steps, jnp.float32)
                lr = jnp.float32(cfg.lr) * (1.0 - frac) if cfg.anneal_lr else jnp.float32(cfg.lr)
                (_, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, mb)
                p, o = apply_adam(tx, grads, o, p, lr)
                return (p, o), {**stats, "lr": lr}

            return jax.lax.scan(minibatch, carry, (mbs, jnp.arange(n_mb)))

        (params, opt_state), stats = jax.lax.scan(
            epoch, (params, opt_state),
            (jax.random.split(key, cfg.n_epochs), jnp.arange(cfg.n_epochs)))
        lr_last = stats.pop("lr")[-1, -1]
        stats = {k: v.mean() for k, v in stats.items()}
        stats["lr"] = lr_last
        stats.update(extra)
        return params, opt_state, stats

    return update


def steps_per_update(size: int, cfg: IPPOConfig) -> int:
    """Optimiser applications of one update over `size` transitions."""
    return cfg.n_epochs * minibatch_count(size, cfg.n_minibatches)
