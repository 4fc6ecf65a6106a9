"""One PPO / TRPO update, determinism, configuration validation."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_agents.algorithms import compile_algorithm, make_config
from jaxrl_agents.ppo import PPOConfig
from jaxrl_agents.trpo import TRPOConfig

from .conftest import CFG, SEEDS


def _one_update(algo, env):
    cfg = make_config(algo, CFG[algo])
    c = compile_algorithm(algo, env, cfg)
    keys = jnp.stack([jax.random.PRNGKey(s) for s in SEEDS])
    state = c.init(keys, env.default_params)
    before = jax.device_get(state.params)
    after_state, stats = c.update(state, env.default_params)
    return cfg, before, jax.device_get(after_state), jax.device_get(stats)


@pytest.mark.parametrize("algo", ["ppo", "trpo"])
def test_one_update_changes_params_and_stays_float32(algo, toy_env, x64):
    cfg, before, after, stats = _one_update(algo, toy_env)
    for part in ("actor", "critic"):
        diffs = jax.tree_util.tree_map(lambda a, b: float(np.abs(a - b).max()), before[part],
                                       after.params[part])
        assert max(jax.tree_util.tree_leaves(diffs)) > 0, f"{part} did not move"
    assert all(x.dtype == np.float32 for x in jax.tree_util.tree_leaves(after.params))
    np.testing.assert_array_equal(after.update, [1, 1])
    assert all(np.all(np.isfinite(v)) for v in stats.values())
    if algo == "trpo":
        # The accepted step respects the trust region (and the line search found one).
        assert np.all(stats["kl"] < cfg.target_kl) and np.all(stats["kl"] > 0)
        np.testing.assert_array_equal(stats["line_search_success"], [1.0, 1.0])
        assert np.all(stats["improvement"] > 0)
    else:
        assert np.all(stats["approx_kl"] > 0) and np.all(stats["clip_frac"] >= 0)
        # Harmonic decay, per gradient step: the last of 4 epochs x 4 minibatches is step 15 of
        # 30 updates x 16 = 480.
        np.testing.assert_allclose(stats["lr"], 3e-3 / (1 + 10**0.4 * 15 / 480), rtol=1e-6)
    # Seeds are independent: different initial parameters.
    k = before["actor"]["net"]["dense_0"]["kernel"]
    assert not np.array_equal(k[0], k[1])


def test_same_seed_gives_bit_identical_params(toy_env, x64):
    _, _, a, _ = _one_update("ppo", toy_env)
    _, _, b, _ = _one_update("ppo", toy_env)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("cls, fields, match", [
    (PPOConfig, dict(n_minibatches=3), "n_minibatches: expected a divisor of the batch"),
    (PPOConfig, dict(n_envs=0), "n_envs: expected a positive integer"),
    (PPOConfig, dict(n_steps=-5), "n_steps: expected a positive integer"),
    (PPOConfig, dict(lr=math.nan), "lr: expected a number, not NaN"),
    (PPOConfig, dict(lr=-1e-3), "lr: expected a positive number"),
    (PPOConfig, dict(gamma=1.5), "gamma: expected a number in"),
    (PPOConfig, dict(activation="swish"), "activation: expected one of"),
    (PPOConfig, dict(hidden=()), "hidden: expected a non-empty"),
    (PPOConfig, dict(n_envs=2.5), "n_envs: expected an integer"),
    (PPOConfig, dict(total_steps=100), "total_steps: expected at least one update"),
    (TRPOConfig, dict(batch_size=100), "batch_size: expected a divisor of the rollout"),
    (TRPOConfig, dict(target_kl=0), "target_kl: expected a positive number"),
    (TRPOConfig, dict(line_search_shrinking_factor=1.0), "line_search_shrinking_factor"),
])
def test_config_validation_names_the_field(cls, fields, match):
    with pytest.raises(ValueError, match=match):
        cls(**fields)


def test_paper_defaults():
    p, t = PPOConfig(), TRPOConfig()
    assert (p.n_envs, p.n_steps, p.n_epochs, p.n_minibatches, p.minibatch_size) == (64, 128, 10, 32, 256)
    assert p.n_updates == 2441 and p.n_grad_steps == 781_120 and p.activation == "tanh"
    assert (t.n_envs, t.n_steps, t.batch_size, t.n_minibatches, t.cg_max_steps) == (4, 2048, 128, 64, 15)
    assert t.activation == "relu" and t.target_kl == 0.01 and t.n_updates == 2441
    with pytest.raises(ValueError, match="algo: expected one of"):
        make_config("sac")
    with pytest.raises(ValueError, match="unknown fields"):
        make_config("ppo", {"n_epoch": 3})


@pytest.mark.parametrize("kind, shape", [("gaussian", (2,)), ("categorical", (4,))])
def test_fisher_vector_product_equals_the_kl_hessian(kind, shape):
    """TRPO's Gauss-Newton product J^T H_d J equals differentiating the KL twice at theta_0."""
    from jax.flatten_util import ravel_pytree

    from jaxrl_agents import ActorCritic
    from jaxrl_agents.trpo import kl_hessian_vector_product

    model = ActorCritic(3, kind, shape, hidden=(8,), activation="tanh")
    actor = model.init(jax.random.PRNGKey(0))["actor"]
    if kind == "gaussian":
        actor["log_std"] = jnp.array([0.3, -0.5])
    actor["net"]["dense_1"]["kernel"] = actor["net"]["dense_1"]["kernel"] * 50  # non-trivial dist
    flat0, unravel = ravel_pytree(actor)
    obs = jax.random.normal(jax.random.PRNGKey(1), (32, 3))
    dist_old = model.dist(actor, obs)

    def kl(flat):
        return jnp.mean(model.kl(model.dist(unravel(flat), obs), dist_old))

    v = jax.random.normal(jax.random.PRNGKey(2), flat0.shape)
    reference = jax.grad(lambda f: jax.grad(kl)(f) @ v)(flat0)
    fast = kl_hessian_vector_product(model, unravel, flat0, obs)(v)
    np.testing.assert_allclose(fast, reference, rtol=2e-4, atol=1e-6)
    assert float(jnp.abs(reference).max()) > 1e-3
