"""TRPO's own objective: the surrogate, the mean KL and the KL's Hessian-vector product.

The importance-weighted surrogate, the mean KL to the rollout policy and the KL's Hessian-vector
product (the Fisher-vector product of the natural-gradient step).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["surrogate", "mean_kl", "kl_hessian_vector_product"]


def surrogate(model, actor_params, obs, action, logp_old, adv) -> jax.Array:
    """Mean of adv * pi(a|s) / pi_old(a|s) (TRPO maximises it).

    Args:
        model: `ActorCritic`.
        actor_params: ``params["actor"]``.
        obs: (B, obs_dim) observations.
        action: (B, *action_shape) actions taken.
        logp_old: (B,) log-probs at collection.
        adv: (B,) advantages.
    """
    logp = model.logp(model.dist(actor_params, obs), action)
    return jnp.mean(adv * jnp.exp(logp - logp_old))


def mean_kl(model, actor_params, obs, dist_old) -> jax.Array:
    """Mean over `obs` (B, obs_dim) of KL(pi_theta || pi_old).

    `dist_old` is the old distribution parameters (``model.dist`` output, gradient stopped).
    """
    return jnp.mean(model.kl(model.dist(actor_params, obs), dist_old))


def kl_hessian_vector_product(model, unravel, flat0, obs):
    """V -> H v, H the Hessian at flat0 of theta -> mean KL(pi_theta || pi_flat0) over `obs`.

    At theta = flat0 the KL's gradient with respect to the distribution parameters d vanishes, so
    H = J^T (d^2 KL / dd^2) J exactly (the generalised Gauss-Newton form), with J the Jacobian of
    the distribution parameters. The network is linearised once (`jax.linearize`, `jax.vjp`) and
    each product costs one linear forward and one linear backward pass, instead of the
    differentiate-twice product (grad of grad . v) that re-runs the network every CG iteration.

    Args:
        model: `ActorCritic`.
        unravel: flat vector -> actor params.
        flat0: (P,) flat actor parameters.
        obs: (B, obs_dim).

    Returns:
        A function (P,) -> (P,).
    """
    def dist_fn(flat):
        return model.dist(unravel(flat), obs)

    dist0, jvp_fn = jax.linearize(dist_fn, flat0)
    _, vjp_fn = jax.vjp(dist_fn, flat0)
    dist_old = jax.lax.stop_gradient(dist0)
    grad_kl_d = jax.grad(lambda d: jnp.mean(model.kl(d, dist_old)))

    def hvp(v):
        u = jvp_fn(v)
        hu = jax.jvp(grad_kl_d, (dist0,), (u,))[1]
        return vjp_fn(hu)[0]

    return hvp
