"""Generalised advantage estimation (Schulman et al. 2015) as a reverse `lax.scan` over time."""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["gae"]


def gae(rewards: jax.Array, values: jax.Array, dones: jax.Array, last_value: jax.Array,
        gamma: float, lam: float) -> tuple[jax.Array, jax.Array]:
    """Advantages and lambda-returns.

    delta_t = r_t + gamma V_{t+1} (1 - done_t) - V_t;  A_t = delta_t + gamma lam (1 - done_t) A_{t+1}.
    ``done_t`` marks that the episode ended at step t (terminated or truncated); it cuts both the
    bootstrap and the trace, which matters because auto-reset puts the next episode's first
    observation in the same array. Truncated episodes get their bootstrap through the reward
    (see rollout.collect), exactly as Stable-Baselines3 does.

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
    rewards = rewards.astype(jnp.float32)
    values = values.astype(jnp.float32)
    not_done = 1.0 - dones.astype(jnp.float32)

    def body(carry, x):
        next_adv, next_value = carry
        r, v, nd = x
        delta = r + gamma * next_value * nd - v
        adv = delta + gamma * lam * nd * next_adv
        return (adv, v), adv

    init = (jnp.zeros_like(last_value, jnp.float32), last_value.astype(jnp.float32))
    _, adv = jax.lax.scan(body, init, (rewards, values, not_done), reverse=True)
    return adv, adv + values
