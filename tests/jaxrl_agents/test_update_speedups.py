"""The faster formulations inside an update give what the plain ones gave, element for element.

Issue 16 sped the PPO/TRPO update up without moving a bit of the paper runs; each rewritten piece is
checked here against the formulation it replaced (and, where small enough, against a hand count).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_agents.common.minibatch import minibatch_epochs
from jaxrl_agents.common.permutation import permutation, stable_argsort_u32


# 1: no sort round; 5: one round, two radix passes; 8192: two rounds; 70_000: three radix passes.
# 2, 64 and 1000 take the path of n=5 here (one round, two passes): -m slow, ~17 s of compiling.
_SAME_PATH_AS_5 = pytest.mark.slow


@pytest.mark.parametrize("use_x64", [True, False], ids=["x64", "float32"])
@pytest.mark.parametrize("n", [1, pytest.param(2, marks=_SAME_PATH_AS_5), 5,
                               pytest.param(64, marks=_SAME_PATH_AS_5),
                               pytest.param(1000, marks=_SAME_PATH_AS_5), 8192, 70_000])
def test_permutation_is_jax_random_permutation(use_x64, n):
    with jax.enable_x64(use_x64):
        ours = jax.jit(lambda k: permutation(k, n))  # one program per n, run on every key
        for seed in range(4):
            key = jax.random.PRNGKey(seed)
            np.testing.assert_array_equal(np.asarray(ours(key)),
                                          np.asarray(jax.random.permutation(key, n)))


def test_permutation_without_x64_sorts_uint32_only():
    """Float32 runs (issue 36) get the radix path: JAX's permutation, with no comparator sort."""
    with jax.enable_x64(False):
        key = jax.random.PRNGKey(3)
        np.testing.assert_array_equal(np.asarray(jax.jit(lambda k: permutation(k, 300))(key)),
                                      np.asarray(jax.random.permutation(key, 300)))
        jaxpr = str(jax.make_jaxpr(lambda k: permutation(k, 2048))(key))
    sorts = [line for line in jaxpr.splitlines() if " sort[" in line]
    assert sorts and all("num_keys=1" in line and "u32[" in line for line in sorts), sorts
    assert "u64" not in jaxpr


@pytest.mark.parametrize("use_x64", [True, False], ids=["uint64 packing", "uint32 radix"])
def test_stable_argsort_keeps_tied_keys_in_order(use_x64):
    # Ties are what the packing must get right (32-bit keys of 8192 rows tie ~1 % of the time);
    # the radix path must also order keys that differ only in their high bits (its last pass).
    with jax.enable_x64(use_x64):
        argsort = jax.jit(stable_argsort_u32)  # one program per size, not one per primitive
        keys = np.array([3, 1, 3, 0, 1, 2**32 - 1, 0, 3, 2**31], np.uint32)
        ours = np.asarray(argsort(jnp.asarray(keys)))
        np.testing.assert_array_equal(ours, [3, 6, 1, 4, 0, 2, 7, 8, 5])
        np.testing.assert_array_equal(ours, np.argsort(keys, kind="stable"))
        rng = np.random.default_rng(0)
        for many in (rng.integers(0, 50, 5000).astype(np.uint32),
                     (rng.integers(0, 4, 70_000) * (2**30 + 12345)).astype(np.uint32)):
            np.testing.assert_array_equal(np.asarray(argsort(jnp.asarray(many))),
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


def test_first_accepted_by_hand():
    # Candidates 1 - 3 * 0.8^k = -2, -1.4, -0.92, ...; objective -x^2 (obj0 = -1), KL always fine:
    # -4 and -1.96 are worse than -1, -0.8464 is better, so k = 2 is the first accepted.
    from jaxrl_agents.trpo.update import _first_accepted

    steps = 3.0 * 0.8 ** jnp.arange(10, dtype=jnp.float32)
    found, k, obj, kl = _first_accepted(lambda f: -(f ** 2).sum(), lambda f: 0.0 * f.sum(),
                                        jnp.ones(1), steps, -jnp.ones(1), jnp.float32(-1.0), 0.01)
    assert bool(found) and int(k) == 2
    np.testing.assert_allclose(float(obj), -(1 - 3 * 0.8 ** 2) ** 2, rtol=1e-6)
    # Nothing qualifies (KL always too large): not found, the caller keeps the old parameters.
    found, _, _, _ = _first_accepted(lambda f: -(f ** 2).sum(), lambda f: 1.0 + 0.0 * f.sum(),
                                     jnp.ones(1), steps, -jnp.ones(1), jnp.float32(-1.0), 0.01)
    assert not bool(found)


@functools.cache
def _actor_step(sequential):
    """TRPO's actor step of the line-search test, compiled once per line search.

    target_kl is its last argument, as the update passes it (`trpo.traced_settings`), so every
    limit and seed shares the program.
    """
    from jaxrl_agents.common.networks import ActorCritic
    from jaxrl_agents.trpo import TRPOConfig
    from jaxrl_agents.trpo.update import actor_step

    model = ActorCritic(5, "gaussian", (2,), hidden=(16,), activation="relu")
    cfg = TRPOConfig(sequential_line_search=sequential)
    return model, jax.jit(lambda a, o, x, lp, ad, kl: actor_step(model, a, o, x, lp, ad, cfg, kl))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("target_kl", [1e-4, 0.01, 0.3])
def test_sequential_line_search_takes_the_batched_step(seed, target_kl):
    model, _ = _actor_step(False)
    k_init, k_obs, k_act, k_adv = jax.random.split(jax.random.PRNGKey(seed), 4)
    actor = model.init(k_init)["actor"]
    obs = jax.random.normal(k_obs, (256, 5))
    action, logp = model.sample(actor, obs, k_act)
    adv = jax.random.normal(k_adv, (256,))
    outs = {seq: _actor_step(seq)[1](actor, obs, action, logp, adv, np.float32(target_kl))
            for seq in (False, True)}
    (p_all, s_all), (p_seq, s_seq) = outs[False], outs[True]
    assert float(s_all["line_search_success"]) == float(s_seq["line_search_success"])
    for k in s_all:
        np.testing.assert_allclose(float(s_seq[k]), float(s_all[k]), rtol=1e-4, atol=1e-7)
    for a, b in zip(jax.tree_util.tree_leaves(p_all), jax.tree_util.tree_leaves(p_seq)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6)


def test_trainer_evaluates_each_update_on_its_own_parameters(tmp_path):
    # The loop queues an update's evaluation before it reads the update's stats: every eval row
    # must still be the episode of that update's parameters. Evaluating every update, the row of
    # update u is eval_summary of the evaluation of the parameters checkpointed after update u.
    from jaxrl_agents.common.contracts import evaluation_of
    from jaxrl_agents.common.evaluation import eval_summary
    from jaxrl_agents.run import loop, records, trainer
    from jaxrl_agents.run.algorithms import compile_algorithm, make_config
    from jaxrl_agents.run.checkpoint import load_checkpoint
    from jaxrl_agents.run.run_files import read_progress

    from .conftest import PPO_CFG, SEEDS, TOY_ENV
    from .toy_envs import make_reach

    # PPO_CFG's program (the trainer tests compile it), stopped after 3 of its 30 updates.
    cfg = PPO_CFG
    res = trainer.train(algo="ppo", env=TOY_ENV, config=cfg, seeds=SEEDS, eval_every=512,
                        out=str(tmp_path), checkpoint_every=1, progress="off", stop_after=3)
    assert not res.finished
    with jax.enable_x64(True):
        env = make_reach()
        compiled = compile_algorithm("ppo", env, make_config("ppo", cfg))
        template = compiled.init(jnp.stack([jax.random.PRNGKey(s) for s in SEEDS]),
                                 env.default_params)
        state, meta = load_checkpoint(f"{res.run_dirs[0]}/checkpoint.npz", template)
        assert meta["update"] == 3
        episodes = jax.device_get(compiled.evaluate(state.params["actor"], env.eval_params,
                                                    jax.random.PRNGKey(loop.EVAL_KEY_SEED)))
    for s, d in enumerate(res.run_dirs):
        rows = read_progress(f"{d}/progress.csv")
        assert all("eval_return" in r for r in rows)
        want = eval_summary({k: v[s] for k, v in episodes.items()}, evaluation_of(env))
        assert rows[-1]["eval_return"] == records.fmt(want["eval_return"])
        assert rows[-1]["eval_len"] == records.fmt(want["eval_len"])


def test_param_shapes_is_cached_per_definition_and_returns_a_copy():
    # Policy checks parameters against param_shapes at every evaluation; it is traced once per
    # definition, and a caller editing the returned tree must not change what the next one gets.
    from jaxrl_agents.common.networks import ActorCritic, _param_shapes

    model = ActorCritic(5, "gaussian", (2,), hidden=(16, 8))
    first = model.param_shapes()
    assert first["actor"]["log_std"] == (2,)
    assert first["actor"]["net"]["dense_0"]["kernel"] == (5, 16)
    assert first["critic"]["net"]["dense_2"]["kernel"] == (8, 1)
    hits = _param_shapes.cache_info().hits
    first["actor"]["log_std"] = (99,)
    again = ActorCritic(5, "gaussian", (2,), hidden=(16, 8)).param_shapes()  # equal definition
    assert _param_shapes.cache_info().hits == hits + 1
    assert again["actor"]["log_std"] == (2,)
    assert ActorCritic(5, "gaussian", (3,), hidden=(16, 8)).param_shapes()["actor"]["log_std"] == (3,)
