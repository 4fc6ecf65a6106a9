"""The losses PPO, TRPO and IPPO share.

The clipped surrogate (PPO and IPPO), the value MSE (every critic, IPPO-Lagrangian's cost critic
included) and the advantage standardisation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["standardize", "value_loss", "ppo_loss"]


def standardize(adv: jax.Array) -> jax.Array:
    """(A - mean) / (std + 1e-8) over every element of `adv` (SB3's advantage normalisation)."""
    return (adv - adv.mean()) / (adv.std() + 1e-8)


def value_loss(model, critic_params, obs: jax.Array, ret: jax.Array) -> jax.Array:
    """Mean squared error of the critic against its targets.

    Args:
        model: `ActorCritic` (any critic with its definition, e.g. a cost critic).
        critic_params: ``params["critic"]`` (or ``params["cost_critic"]``).
        obs: (B, obs_dim) observations.
        ret: (B,) targets (lambda-returns).

    Returns:
        () mean of (ret - V(obs))^2.
    """
    return ((ret - model.value(critic_params, obs)) ** 2).mean()


def ppo_loss(model, params, batch: dict, clip_eps: float, vf_coef: float, ent_coef: float,
             normalize_advantage: bool = True):
    """Clipped-surrogate loss + vf_coef * value MSE - ent_coef * entropy.

    Args:
        model: `ActorCritic`.
        params: ``{"actor", "critic"}``.
        batch: dict of (B, ...) arrays: obs, action, logp (old log-probs), adv, ret (lambda-returns),
            optionally mask (discrete action masks).
        clip_eps: PPO clip range of the probability ratio r.
        vf_coef: weight of the value MSE.
        ent_coef: weight of the entropy bonus.
        normalize_advantage: normalise `adv` over this batch, (A - mean) / (std + 1e-8), as SB3.

    Returns:
        (loss, stats) with stats pg_loss, v_loss, entropy, approx_kl = E[(r - 1) - log r] and
        clip_frac = P(|r - 1| > clip_eps).
    """
    dist = model.dist(params["actor"], batch["obs"], batch.get("mask"))
    logp = model.logp(dist, batch["action"])
    log_ratio = logp - batch["logp"]
    ratio = jnp.exp(log_ratio)
    adv = batch["adv"]
    if normalize_advantage:
        adv = standardize(adv)
    pg_loss = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - clip_eps, 1 + clip_eps) * adv).mean()
    v_loss = value_loss(model, params["critic"], batch["obs"], batch["ret"])
    entropy = model.entropy(dist).mean()
    loss = pg_loss + vf_coef * v_loss - ent_coef * entropy
    stats = {"pg_loss": pg_loss, "v_loss": v_loss, "entropy": entropy,
             "approx_kl": ((ratio - 1) - log_ratio).mean(),
             "clip_frac": (jnp.abs(ratio - 1) > clip_eps).astype(jnp.float32).mean()}
    return loss, stats

