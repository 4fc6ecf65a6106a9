"""The faster formulations inside an update give what the plain ones gave, element for element.

Issue 16 sped the PPO/TRPO update up without moving a bit of the paper runs; each rewritten piece is
checked here against the formulation it replaced (and, where small enough, against a hand count).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_agents.common.minibatch import minibatch_epochs
from jaxrl_agents.common.permutation import permutation, stable_argsort_u32


@pytest.mark.parametrize("n", [1, 2, 5, 64, 1000, 8192, 70_000])
def test_permutation_is_jax_random_permutation(x64, n):
    for seed in range(4):
        key = jax.random.PRNGKey(seed)
        ours = np.asarray(jax.jit(lambda k: permutation(k, n))(key))
        np.testing.assert_array_equal(ours, np.asarray(jax.random.permutation(key, n)))


def test_permutation_without_x64_falls_back_to_jax():
    with jax.enable_x64(False):
        key = jax.random.PRNGKey(3)
        np.testing.assert_array_equal(np.asarray(permutation(key, 300)),
                                      np.asarray(jax.random.permutation(key, 300)))


def test_stable_argsort_keeps_tied_keys_in_order(x64):
    # Ties are what the packing must get right (32-bit keys of 8192 rows tie ~1 % of the time).
    keys = np.array([3, 1, 3, 0, 1, 2**32 - 1, 0, 3, 2**31], np.uint32)
    ours = np.asarray(stable_argsort_u32(jnp.asarray(keys)))
    np.testing.assert_array_equal(ours, [3, 6, 1, 4, 0, 2, 7, 8, 5])
    np.testing.assert_array_equal(ours, np.argsort(keys, kind="stable"))
    rng = np.random.default_rng(0)
    many = rng.integers(0, 50, 5000).astype(np.uint32)
    np.testing.assert_array_equal(np.asarray(stable_argsort_u32(jnp.asarray(many))),
                                  np.argsort(many, kind="stable"))


def test_minibatch_epochs_visits_jax_permutations_in_order(x64):
    # 2 epochs x 3 minibatches of 12 rows: the step records each minibatch; epoch e must be rows
    # jax.random.permutation(split(key, 2)[e], 12) cut into three blocks of four.
    data = {"x": jnp.arange(12.0) * 10, "i": jnp.arange(12)}
    key = jax.random.PRNGKey(7)

    def step(carry, mb, e, m):
        return carry + 1, (mb["i"], e, m)

    count, (rows, es, ms) = jax.jit(
        lambda d, k: minibatch_epochs(step, jnp.int32(0), d, k, 2, 3))(data, key)
    assert int(count) == 6
    np.testing.assert_array_equal(np.asarray(es), [[0, 0, 0], [1, 1, 1]])
    np.testing.assert_array_equal(np.asarray(ms), [[0, 1, 2], [0, 1, 2]])
    for e, k in enumerate(jax.random.split(key, 2)):
        want = np.asarray(jax.random.permutation(k, 12)).reshape(3, 4)
        np.testing.assert_array_equal(np.asarray(rows[e]), want)
        assert sorted(np.asarray(rows[e]).ravel().tolist()) == list(range(12))
