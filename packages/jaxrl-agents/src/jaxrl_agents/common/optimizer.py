"""The one optimiser of every algorithm, and the two learning-rate schedules.

Adam (optionally after global-norm clipping), applied with an explicit float32 learning rate.

The learning rate is computed by the algorithm (per gradient step for PPO and IPPO, per update for
TRPO's critic) and applied here rather than through an optax schedule, so the step index lives in
the train state we checkpoint, and a float64 rate (under x64) can never promote float32 parameters
to float64.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

__all__ = ["make_optimizer", "apply_adam", "harmonic_lr", "linear_lr"]


def harmonic_lr(lr0: float, k: float, progress: jax.Array) -> jax.Array:
    """The paper's decay lr0 / (1 + k * progress) as float32.

    Args:
        lr0: initial learning rate.
        k: decay constant (0: constant rate).
        progress: () fraction of training done, in [0, 1].
    """
    return jnp.float32(lr0) / (1.0 + jnp.float32(k) * jnp.asarray(progress, jnp.float32))


def linear_lr(lr0: float, progress: jax.Array) -> jax.Array:
    """Linear annealing lr0 * (1 - progress) as float32 (IPPO's ``anneal_lr``).

    Args:
        lr0: initial learning rate.
        progress: () float32 fraction of the run's optimiser applications done, in [0, 1].
    """
    return jnp.float32(lr0) * (1.0 - progress)


def make_optimizer(eps: float, max_grad_norm: float | None = None) -> optax.GradientTransformation:
    """Adam direction (no learning rate), optionally after global-norm gradient clipping.

    PPO and IPPO clip (``max_grad_norm``); TRPO's critic does not (SB3's TRPO does not clip).

    Args:
        eps: Adam epsilon.
        max_grad_norm: global gradient-norm clip, or None for none.
    """
    adam = optax.scale_by_adam(eps=eps)
    if max_grad_norm is None:
        return adam
    return optax.chain(optax.clip_by_global_norm(max_grad_norm), adam)


def apply_adam(tx: optax.GradientTransformation, grads, opt_state, params, lr: jax.Array):
    """One optimiser step params <- params - lr * direction, keeping every parameter's dtype.

    Args:
        tx: the transformation of `make_optimizer`.
        grads: gradients, a pytree like `params`.
        opt_state: the optimiser state of `tx` for `params`.
        params: the optimised parameters (pytree; each leaf keeps its dtype).
        lr: () float32 learning rate.

    Returns:
        (new params, new optimiser state).
    """
    direction, opt_state = tx.update(grads, opt_state, params)
    params = jax.tree_util.tree_map(lambda p, d: (p - lr * d).astype(p.dtype), params, direction)
    return params, opt_state
