"""``jax.random.permutation(key, n)``, the same permutation at a fraction of the cost on CPU.

JAX shuffles by sorting: each of ``ceil(3 ln n / ln(2^32 - 1))`` rounds splits the key, draws
32-bit sort keys and applies a *stable* key-value sort (`lax.sort_key_val`). XLA's CPU sort of two
operands calls a comparator per comparison; a single-operand sort of a primitive type does not. So
each round here packs (sort key, position) into one uint64, key in the high half: the integers are
distinct, and their ascending order is the stable order of the keys (ties keep their positions),
which makes the permutation identical to JAX's, element for element. The minibatch loop draws one
permutation of the rollout per epoch, and this cut its cost about 4x (bench/README.md, "Where an
update's time goes").

The uint64 packing needs x64. Without it (float32 runs, issue 36) the same stable order comes
from a least-significant-digit radix sort of single-operand uint32 sorts: each pass packs a digit
of the key above the element's position in the previous pass's order (``b = bit_length(n - 1)``
bits of position, ``32 - b`` of key), so 2 passes for n <= 2^16. Falling back to
`jax.random.permutation` there made a float32 CartPole update ~20 % slower than under x64
(bench/README.md, issue 36). Beyond 2^24 elements (more than 4 passes) it is
`jax.random.permutation` again.
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


_MAX_RADIX_BITS = 24  # position bits of the radix path: n <= 2^24, at most 4 passes


def _x64() -> bool:
    return jax.dtypes.canonicalize_dtype(jnp.uint64) == jnp.uint64


def stable_argsort_u32(keys: jax.Array) -> jax.Array:
    """(n,) int32 indices that sort the (n,) uint32 `keys` stably (equal keys keep their order).

    Under x64 one uint64 sort of key << 32 | position (n < 2^32); without it a radix sort of
    uint32 sorts (`_radix_argsort_u32`, n <= 2^24). Both give the same indices.
    """
    if not _x64():
        return _radix_argsort_u32(keys)
    pos = jnp.arange(keys.shape[0], dtype=jnp.uint64)
    packed = (keys.astype(jnp.uint64) << jnp.uint64(32)) | pos
    return (lax.sort(packed) & jnp.uint64(0xFFFFFFFF)).astype(jnp.int32)


def _radix_argsort_u32(keys: jax.Array) -> jax.Array:
    """`stable_argsort_u32` without 64-bit integers: (n,) int32, for n <= 2^24.

    Least significant digit first: each pass sorts ``digit << b | rank`` (rank: the element's
    place in the order so far, b bits), distinct uint32 values whose ascending order is the
    stable order by the digit; after the last (most significant) digit the order is by the whole
    key, ties in their original order.
    """
    n = keys.shape[0]
    b = max(1, (n - 1).bit_length())
    if b > _MAX_RADIX_BITS:
        raise ValueError(f"keys: expected at most 2^{_MAX_RADIX_BITS} keys without x64, got {n}")
    d = 32 - b  # key bits per pass
    rank = jnp.arange(n, dtype=jnp.uint32)
    order, digits_of = None, keys
    for shift in range(0, 32, d):
        digit = (digits_of >> jnp.uint32(shift)) & jnp.uint32((1 << min(d, 32 - shift)) - 1)
        idx = lax.sort((digit << jnp.uint32(b)) | rank) & jnp.uint32((1 << b) - 1)
        order = idx if order is None else order[idx]
        digits_of = keys[order]  # the keys in the order so far, for the next digit
    return order.astype(jnp.int32)


def permutation(key: jax.Array, n: int) -> jax.Array:
    """``jax.random.permutation(key, n)``: (n,) a random permutation of arange(n), same values.

    Args:
        key: PRNG key (raw uint32 (2,) or typed).
        n: static length.
    """
    if n >= 2**32 or (not _x64() and n > 2**_MAX_RADIX_BITS):
        return jax.random.permutation(key, n)
    x = jnp.arange(n)
    for r in range(_rounds(n)):
        key, sub = jax.random.split(key)
        order = stable_argsort_u32(jax.random.bits(sub, (n,), jnp.uint32))
        # Round 0 sorts arange(n) itself, so its gather would be the identity.
        x = order.astype(x.dtype) if r == 0 else x[order]
    return x

