"""The one minibatch loop (PPO, IPPO and TRPO's critic all train this way).

Epochs over fresh permutations of a flat batch, each split into equal minibatches, as a
`lax.scan` of `lax.scan`s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from .permutation import permutation

__all__ = ["minibatch_epochs"]


def minibatch_epochs(step: Callable[[Any, Any, jax.Array, jax.Array], tuple[Any, Any]], carry,
                     data, key: jax.Array, n_epochs: int, n_minibatches: int):
    """Run ``step`` on every minibatch of `n_epochs` shuffled passes over `data`.

    Epoch e draws its permutation with the e-th key of ``jax.random.split(key, n_epochs)``.

    Args:
        step: ``step(carry, minibatch, epoch, index) -> (carry, out)``; `minibatch` has the
            structure of `data` with leaves (B / n_minibatches, ...); `epoch` and `index` are ()
            int32 (for learning-rate schedules).
        carry: the loop state (parameters, optimiser state, ...).
        data: pytree of (B, ...) arrays, B divisible by `n_minibatches`.
        key: PRNG key of the permutations.
        n_epochs: passes over `data`.
        n_minibatches: minibatches per pass.

    Returns:
        (final carry, outs with leaves (n_epochs, n_minibatches, ...)).
    """
    size = jax.tree_util.tree_leaves(data)[0].shape[0]
    mb_size = size // n_minibatches

    def epoch(carry, xs):
        k, e = xs
        perm = permutation(k, size)  # = jax.random.permutation(k, size), faster on CPU
        mbs = jax.tree_util.tree_map(
            lambda x: x[perm].reshape((n_minibatches, mb_size) + x.shape[1:]), data)

        def minibatch(carry, xs):
            mb, m = xs
            return step(carry, mb, e, m)

        return jax.lax.scan(minibatch, carry, (mbs, jnp.arange(n_minibatches)))

    return jax.lax.scan(epoch, carry, (jax.random.split(key, n_epochs), jnp.arange(n_epochs)))
