"""One PPO / TRPO update, determinism, configuration validation."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_agents.run.algorithms import compile_algorithm, make_config
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
    (PPOConfig, dict(target_kl=0), "target_kl: expected a positive number"),
    (TRPOConfig, dict(batch_size=100), "batch_size: expected a divisor of the rollout"),
    (TRPOConfig, dict(target_kl=0), "target_kl: expected a positive number"),
    (TRPOConfig, dict(line_search_shrinking_factor=1.0), "line_search_shrinking_factor"),
])
def test_config_validation_names_the_field(cls, fields, match):
    with pytest.raises(ValueError, match=match):
        cls(**fields)


@pytest.mark.parametrize("cls", [PPOConfig, TRPOConfig])
@pytest.mark.parametrize("field, value", [
    ("lr", math.inf), ("lr", -math.inf), ("gamma", math.inf), ("adam_eps", math.inf),
    ("lr_decay", math.inf), ("target_kl", -math.inf)])
def test_every_float_setting_must_be_finite(cls, field, value):
    """Before: PPOConfig(lr=inf) was accepted and trained an all-NaN policy."""
    with pytest.raises(ValueError, match=f"{field}: expected a finite number, got -?inf"):
        cls(**{field: value})


def test_ppo_target_kl_takes_inf_as_off():
    assert PPOConfig(target_kl=math.inf).target_kl == math.inf == PPOConfig().target_kl


@pytest.mark.parametrize("cls", [PPOConfig, TRPOConfig])
@pytest.mark.parametrize("field, value, expected", [
    ("lr", "50", "a real number"), ("lr", True, "a real number"), ("lr", 1j, "a real number"),
    ("lr", np.complex128(1), "a real number"), ("n_envs", "50", "an integer"),
    ("n_envs", True, "an integer"), ("n_envs", np.bool_(True), "an integer"),
    ("n_envs", 4 + 0j, "an integer"), ("normalize_advantage", 1, "True or False"),
    ("normalize_advantage", "yes", "True or False"), ("hidden", "64", "a sequence"),
    ("hidden", (64, True), "a non-empty sequence"), ("activation", True, "one of")])
def test_strings_bools_and_complex_are_refused_not_coerced(cls, field, value, expected):
    with pytest.raises(ValueError, match=f"{field}: expected {expected}.*\\({type(value).__name__}\\)"):
        cls(**{field: value})


def test_numpy_numbers_are_accepted_as_python_numbers():
    cfg = PPOConfig(n_envs=np.int64(16), lr=np.float32(0.5), hidden=[np.int32(8)],
                    normalize_advantage=np.bool_(False), n_minibatches=4)
    assert (cfg.n_envs, cfg.lr, cfg.hidden, cfg.normalize_advantage) == (16, 0.5, (8,), False)
    assert type(cfg.n_envs) is int and type(cfg.lr) is float and type(cfg.hidden[0]) is int
    assert type(cfg.normalize_advantage) is bool


def test_paper_defaults():
    p, t = PPOConfig(), TRPOConfig()
    assert (p.n_envs, p.n_steps, p.n_epochs, p.n_minibatches, p.minibatch_size) == (64, 128, 10, 32, 256)
    assert p.n_updates == 2441 and p.n_grad_steps == 781_120 and p.activation == "tanh"
    assert (t.n_envs, t.n_steps, t.batch_size, t.n_minibatches, t.cg_max_steps) == (4, 2048, 128, 64, 15)
    assert t.activation == "relu" and t.target_kl == 0.01 and t.n_updates == 2441
    with pytest.raises(ValueError, match="algo: expected one of"):
        make_config("sac")
    with pytest.raises(ValueError, match="unknown keys"):
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
    # Both jitted (one compile each, where op-by-op dispatch compiled every primitive apart).
    reference = jax.jit(jax.grad(lambda f, v: jax.grad(kl)(f) @ v))(flat0, v)
    fast = jax.jit(lambda v: kl_hessian_vector_product(model, unravel, flat0, obs)(v))(v)
    np.testing.assert_allclose(fast, reference, rtol=2e-4, atol=1e-6)
    assert float(jnp.abs(reference).max()) > 1e-3


def _ppo_rollout(env):
    """Seed 0's first rollout (with GAE) through make_phases: (model, state, batch).

    The rollout phase does not read target_kl, so one rollout serves every learn phase below
    (compiling a phase is what this test costs).
    """
    from jaxrl_agents import ppo
    from jaxrl_agents.run.algorithms import model_for

    cfg = PPOConfig(**CFG["ppo"])
    model = model_for(env, cfg)
    state = ppo.init(jax.random.PRNGKey(0), model, env, env.default_params, cfg)
    rollout_phase, _ = ppo.make_phases(model, env, cfg)
    state, batch = jax.jit(rollout_phase)(state, env.default_params)
    return model, state, batch


def _ppo_learn(env, rollout, **fields):
    """One PPO learn phase of seed 0 on `rollout` through make_phases: (cfg, new state, stats)."""
    from jaxrl_agents import ppo

    model, state, batch = rollout
    cfg = PPOConfig(**{**CFG["ppo"], **fields})
    _, learn_phase = ppo.make_phases(model, env, cfg)
    new_state, stats = jax.jit(learn_phase)(state, batch, ppo.traced_settings(cfg))
    return cfg, jax.device_get(new_state), jax.device_get(stats)


@pytest.mark.parametrize("algo, limits", [("ppo", (1e-12, 1e6)), ("trpo", (0.02, 1e-4))])
def test_configs_that_differ_only_in_the_kl_limit_share_one_program_and_keep_their_bits(
        algo, limits, toy_env):
    """target_kl is an argument of the learning half (`traced_settings`), not a compiled constant.

    Two configs that differ only in it lower to the same learning program, and that program, given
    the second config's settings, computes the bits of the same learning half with the limit
    compiled in (closed over as constants), in float32, where XLA folds constants most. The
    limits are far apart, so the two results must differ: PPO's first stops after one minibatch,
    TRPO's second takes a much shorter step. (The rollout does not read target_kl: one serves both.)
    """
    from jaxrl_agents.run.algorithms import get_algorithm, model_for

    module = get_algorithm(algo).module
    cfgs = [make_config(algo, {**CFG[algo], "target_kl": limit}) for limit in limits]
    model = model_for(toy_env, cfgs[0])
    state = module.init(jax.random.PRNGKey(0), model, toy_env, toy_env.default_params, cfgs[0])
    rollout_phase, _ = module.make_phases(model, toy_env, cfgs[0])
    state, batch = jax.jit(rollout_phase)(state, toy_env.default_params)
    learn_phases = [module.make_phases(model, toy_env, cfg)[1] for cfg in cfgs]
    settings = [module.traced_settings(cfg) for cfg in cfgs]
    texts = [jax.jit(learn).lower(state, batch, s).as_text() for learn, s in zip(learn_phases, settings)]
    assert texts[0] == texts[1]

    shared = jax.jit(learn_phases[0])
    results = [jax.device_get(shared(state, batch, s)) for s in settings]
    compiled_in = jax.device_get(jax.jit(lambda st, b: learn_phases[1](st, b, settings[1]))(state, batch))
    for x, y in zip(jax.tree_util.tree_leaves(results[1]), jax.tree_util.tree_leaves(compiled_in)):
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes()
    first, second = (jax.tree_util.tree_leaves(after.params) for after, _ in results)
    assert any(not np.array_equal(x, y) for x, y in zip(first, second))
    if algo == "ppo":
        assert results[0][1]["grad_steps"] == 1
        assert results[1][1]["grad_steps"] == cfgs[1].n_epochs * cfgs[1].n_minibatches


def test_ppo_target_kl_stops_the_update_as_sb3_does(toy_env, x64):
    """SB3 semantics: a minibatch that starts beyond 1.5 x target_kl is not applied, nor any after.

    With a vanishing target only the first minibatch (whose ratio is exactly 1) is applied, so the
    result must equal one hand-made Adam step on the first minibatch of the first epoch.
    """
    from jaxrl_agents.common.losses import ppo_loss
    from jaxrl_agents.common.optimizer import apply_adam, harmonic_lr, make_optimizer

    rollout = _ppo_rollout(toy_env)
    model, state, (data, _) = rollout
    cfg, after, stats = _ppo_learn(toy_env, rollout, target_kl=1e-12)
    assert stats["grad_steps"] == 1
    _, k_perm = jax.random.split(state.key)
    perm = jax.random.permutation(jax.random.split(k_perm, cfg.n_epochs)[0], cfg.rollout_size)
    first = jax.tree_util.tree_map(lambda x: x[perm][:cfg.minibatch_size], data)

    @jax.jit
    def adam_step_by_hand(params, first):
        grads = jax.grad(lambda p: ppo_loss(model, p, first, cfg.clip_eps, cfg.vf_coef,
                                           cfg.ent_coef)[0])(params)
        tx = make_optimizer(cfg.adam_eps, cfg.max_grad_norm)
        return apply_adam(tx, grads, tx.init(params), params, harmonic_lr(cfg.lr, cfg.lr_decay, 0.0))[0]

    expected = adam_step_by_hand(state.params, first)
    for x, y in zip(jax.tree_util.tree_leaves(expected), jax.tree_util.tree_leaves(after.params)):
        np.testing.assert_allclose(y, x, rtol=1e-6, atol=1e-7)

    # A finite target that is never reached changes nothing (up to float32 rounding: the guarded
    # step compiles to a differently fused program).
    _, unlimited, s_inf = _ppo_learn(toy_env, rollout)
    _, loose, s_loose = _ppo_learn(toy_env, rollout, target_kl=1e6)
    assert s_inf["grad_steps"] == s_loose["grad_steps"] == cfg.n_epochs * cfg.n_minibatches
    for x, y in zip(jax.tree_util.tree_leaves(unlimited.params), jax.tree_util.tree_leaves(loose.params)):
        np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-7)

    # In between, the update stops part-way, and only after the KL has passed the limit.
    target = float(s_inf["approx_kl"]) / 4
    _, _, s_mid = _ppo_learn(toy_env, rollout, target_kl=target)
    assert 1 <= s_mid["grad_steps"] < cfg.n_epochs * cfg.n_minibatches
    assert np.isfinite(s_mid["approx_kl"]) and np.isfinite(s_mid["pg_loss"])
