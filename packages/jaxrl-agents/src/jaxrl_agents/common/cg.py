"""Conjugate gradient for TRPO's natural-gradient direction (matrix-free, fixed iteration count)."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

__all__ = ["conjugate_gradient"]


def conjugate_gradient(matvec: Callable[[jax.Array], jax.Array], b: jax.Array, max_iter: int,
                       residual_tol: float = 1e-10) -> jax.Array:
    """Approximately solve A x = b for symmetric positive-definite A given only x -> A x.

    Follows sb3-contrib's solver: start at x = 0, stop when the squared residual norm falls below
    `residual_tol` or after `max_iter` matrix-vector products. Implemented as a `lax.scan` of
    `max_iter` steps that freezes once converged, so the cost is static and the function vmaps.

    Args:
        matvec: v (n,) -> A v (n,).
        b: right-hand side (n,).
        max_iter: number of iterations (matrix-vector products).
        residual_tol: convergence threshold on |r|^2.

    Returns:
        x (n,).
    """
    x0 = jnp.zeros_like(b)
    r0 = b  # b - A x0 with x0 = 0
    rs0 = r0 @ r0

    def body(carry, _):
        x, r, p, rs, done = carry
        ap = matvec(p)
        # Guard the division: once converged (done) p may be ~0 and p.Ap underflow to 0.
        pap = p @ ap
        alpha = jnp.where(done | (pap == 0), 0.0, rs / jnp.where(pap == 0, 1.0, pap))
        x = x + alpha * p
        r = r - alpha * ap
        rs_new = r @ r
        beta = jnp.where(done, 0.0, rs_new / jnp.where(rs == 0, 1.0, rs))
        p = jnp.where(done, p, r + beta * p)
        done = done | (rs_new < residual_tol)
        return (x, r, p, rs_new, done), None

    (x, *_), _ = jax.lax.scan(body, (x0, r0, r0, rs0, rs0 < residual_tol), None, length=max_iter)
    return x
