"""Adam with the paper's harmonic learning-rate decay, applied with an explicit float32 rate.

The learning rate is computed by the algorithm (per gradient step for PPO, per update for TRPO) and
applied here rather than through an optax schedule, so the step index lives in the train state we
checkpoint, and a float64 rate (under x64) can never promote float32 parameters to float64.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

__all__ = ["harmonic_lr", "make_adam", "apply_adam"]


def harmonic_lr(lr0: float, k: float, progress: jax.Array) -> jax.Array:
    """lr0 / (1 + k * progress) as float32; progress in [0, 1] is the fraction of training done."""
    return jnp.float32(lr0) / (1.0 + jnp.float32(k) * jnp.asarray(progress, jnp.float32))


def make_adam(eps: float, max_grad_norm: float | None = None) -> optax.GradientTransformation:
    """Adam direction (no learning rate), optionally after global-norm gradient clipping."""
    adam = optax.scale_by_adam(eps=eps)
    if max_grad_norm is None:
        return adam
    return optax.chain(optax.clip_by_global_norm(max_grad_norm), adam)


def apply_adam(tx: optax.GradientTransformation, grads, opt_state, params, lr: jax.Array):
    """One optimiser step params <- params - lr * direction, keeping every parameter's dtype."""
    direction, opt_state = tx.update(grads, opt_state, params)
    params = jax.tree_util.tree_map(lambda p, d: (p - lr * d).astype(p.dtype), params, direction)
    return params, opt_state
