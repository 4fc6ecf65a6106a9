"""``jax.random.permutation(key, n)``, the same permutation at a fraction of the cost on CPU.

JAX shuffles by sorting: each of ``ceil(3 ln n / ln(2^32 - 1))`` rounds splits the key, draws
32-bit sort keys and applies a *stable* key-value sort (`lax.sort_key_val`). XLA's CPU sort of two
operands calls a comparator per comparison; a single-operand sort of a primitive type does not. So
each round here packs (sort key, position) into one uint64, key in the high half: the integers are
distinct, and their ascending order is the stable order of the keys (ties keep their positions),
which makes the permutation identical to JAX's, element for element. The minibatch loop draws one
permutation of the rollout per epoch, and this cut its cost about 4x (bench/README.md, "Where an
update's time goes").

The uint64 packing needs x64; without it (and for n >= 2^32) this is `jax.random.permutation`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = ["permutation", "stable_argsort_u32"]


def _rounds(n: int) -> int:
    # jax._src.random.core._shuffle's static number of sort rounds.
    return int(np.ceil(3 * np.log(max(1, n)) / np.log(np.iinfo(np.uint32).max)))


def stable_argsort_u32(keys: jax.Array) -> jax.Array:
    """(n,) int32 indices that sort the (n,) uint32 `keys` stably (equal keys keep their order).

    Needs x64 (one uint64 sort of key << 32 | position) and n < 2^32.
    """
    pos = jnp.arange(keys.shape[0], dtype=jnp.uint64)
    packed = (keys.astype(jnp.uint64) << jnp.uint64(32)) | pos
    return (lax.sort(packed) & jnp.uint64(0xFFFFFFFF)).astype(jnp.int32)


def permutation(key: jax.Array, n: int) -> jax.Array:
    """``jax.random.permutation(key, n)``: (n,) a random permutation of arange(n), same values.

    Args:
        key: PRNG key (raw uint32 (2,) or typed).
        n: static length.
    """
    x64 = jax.dtypes.canonicalize_dtype(jnp.uint64) == jnp.uint64
    if not x64 or n >= 2**32:
        return jax.random.permutation(key, n)
    x = jnp.arange(n)
    for r in range(_rounds(n)):
        key, sub = jax.random.split(key)
        order = stable_argsort_u32(jax.random.bits(sub, (n,), jnp.uint32))
        # Round 0 sorts arange(n) itself, so its gather would be the identity.
        x = order.astype(x.dtype) if r == 0 else x[order]
    return x

