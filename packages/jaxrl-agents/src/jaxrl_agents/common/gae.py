"""Generalised advantage estimation (Schulman et al. 2015) as a reverse `lax.scan` over time.

One definition, `gae_next_values`, takes each transition's own next value and separate
terminated / done flags (what a Python-stepped PettingZoo rollout has: the true next observation of
every step, including the last observation of a finished episode). `gae` is the auto-reset form the
compiled PPO/TRPO rollouts use, expressed through it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["gae", "gae_next_values"]


def gae_next_values(rewards: jax.Array, values: jax.Array, next_values: jax.Array,
                    terminated: jax.Array, dones: jax.Array, gamma: float,
                    lam: float) -> tuple[jax.Array, jax.Array]:
    """Advantages and lambda-returns from each transition's own next value.

    delta_t = r_t + gamma (1 - terminated_t) V(next_obs_t) - V_t;
    A_t = delta_t + gamma lam (1 - done_t) A_{t+1}.

    ``terminated_t`` (the episode reached a true end) removes the bootstrap; ``done_t`` (terminated
    or truncated, or any other reason the next row does not continue this episode) cuts the trace.
    A truncated step therefore keeps gamma V(next_obs_t) but does not mix in the next episode's
    advantages.

    Args:
        rewards: (T, N...) rewards.
        values: (T, N...) V(obs_t).
        next_values: (T, N...) V(next_obs_t), the observation actually reached by step t.
        terminated: (T, N...) bool or {0, 1}: no bootstrap from next_obs_t.
        dones: (T, N...) bool or {0, 1}: the trace stops after step t (must include terminated).
        gamma: discount factor.
        lam: GAE lambda.

    Returns:
        (advantages, returns), both (T, N...) float32, returns = advantages + values.
    """
    rewards = rewards.astype(jnp.float32)
    values = values.astype(jnp.float32)
    next_values = next_values.astype(jnp.float32)
    not_term = 1.0 - terminated.astype(jnp.float32)
    not_done = 1.0 - dones.astype(jnp.float32)

    def body(next_adv, x):
        r, v, nv, nt, nd = x
        adv = r + gamma * nt * nv - v + gamma * lam * nd * next_adv
        return adv, adv

    init = jnp.zeros_like(values[0])
    _, adv = jax.lax.scan(body, init, (rewards, values, next_values, not_term, not_done),
                          reverse=True)
    return adv, adv + values


def gae(rewards: jax.Array, values: jax.Array, dones: jax.Array, last_value: jax.Array,
        gamma: float, lam: float) -> tuple[jax.Array, jax.Array]:
    """Advantages and lambda-returns of an auto-reset rollout.

    delta_t = r_t + gamma V_{t+1} (1 - done_t) - V_t;  A_t = delta_t + gamma lam (1 - done_t) A_{t+1}.
    ``done_t`` marks that the episode ended at step t (terminated or truncated); it cuts both the
    bootstrap and the trace, which matters because auto-reset puts the next episode's first
    observation in the same array. Truncated episodes get their bootstrap through the reward
    (see rollout.collect), exactly as Stable-Baselines3 does.

    This is `gae_next_values` with V(next_obs_t) = V_{t+1} (V after the last step = `last_value`)
    and terminated = done.

    Args:
        rewards: (T, N...) rewards.
        values: (T, N...) V(obs_t) at collection time.
        dones: (T, N...) bool or {0, 1}.
        last_value: (N...) V of the observation after the last step.
        gamma: discount factor.
        lam: GAE lambda.

    Returns:
        (advantages, returns), both (T, N...) float32, returns = advantages + values.
    """
    values = values.astype(jnp.float32)
    next_values = jnp.concatenate([values[1:], last_value.astype(jnp.float32)[None]], axis=0)
    return gae_next_values(rewards, values, next_values, dones, dones, gamma, lam)
