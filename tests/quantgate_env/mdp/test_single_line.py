"""The functional environment against an independent reference of the paper's MDP, and its modes."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import quantgate_env
from quantgate_env import EnvConfig, make

from ..reference_mdp import ReferenceMDP


@pytest.fixture(scope="module")
def x64():
    with jax.enable_x64(True):
        yield


@functools.lru_cache(maxsize=None)
def _compiled(env):
    """Compiled reset and step, shared by every test using the same (hashable) environment."""
    return jax.jit(env.reset), jax.jit(env.step)


def _first_step(env, action, params=None):
    """reset, then one step with ``action``: (obs, state, reward, terminated, truncated, info)."""
    reset, step = _compiled(env)
    params = env.default_params if params is None else params
    _, state = reset(jax.random.PRNGKey(0), params)
    return step(jax.random.PRNGKey(0), state, jnp.asarray(action, dtype=jnp.float64), params)


@pytest.fixture(scope="module")
def paper_env(x64):
    env = make(log_lim=0.0)  # the reference's tests use the current v1 code's zero offset
    return (env,) + _compiled(env)


def _run_both(env, reset, step, actions, reference):
    obs, state = reset(jax.random.PRNGKey(0), env.default_params)
    ref_obs = reference.reset()
    rows = []
    for action in actions:
        obs, state, reward, term, trunc, info = step(jax.random.PRNGKey(0), state, jnp.asarray(action), env.default_params)
        ref_obs, ref_reward, ref_term, ref_trunc, ref_info = reference.step(action)
        rows.append((np.asarray(obs), float(reward), bool(term), bool(trunc), jax.tree.map(np.asarray, info),
                     ref_obs, ref_reward, ref_term, ref_trunc, ref_info))
        if ref_term or ref_trunc:
            break
    return rows


# Concurrence is ill-conditioned while the off-diagonal gate elements are tiny (spec 2.3): early
# in a pulse a 1e-14 difference in the amplitudes moves C by up to ~1e-5 through sqrt(abcd).
# Rewards are compared at 1e-6 wherever |b c| > 1e-6 (conditioning ~1/sqrt|bc| < 1e3 amplifies
# 1e-13 amplitude differences to < 1e-9) and at 3e-4 (the reference project's tolerance) before.
@pytest.mark.parametrize("seed, scale", [(0, 0.05), (1, 0.2), (2, 1.0)])
def test_matches_independent_reference_step_by_step(paper_env, seed, scale):
    env, reset, step = paper_env
    actions = np.random.default_rng(seed).normal(0.0, scale, size=(env.max_episode_steps, 3))
    rows = _run_both(env, reset, step, actions, ReferenceMDP(log_lim=0.0))
    assert len(rows) >= 1
    for obs, reward, term, trunc, info, r_obs, r_reward, r_term, r_trunc, r_info in rows:
        np.testing.assert_allclose(obs, r_obs, atol=1e-6, rtol=0)
        assert (term, trunc) == (r_term, r_trunc)
        np.testing.assert_allclose(info["amps"], r_info["amps"], atol=1e-12)
        assert info["unitarity"] == pytest.approx(r_info["unitarity"], abs=1e-10)
        assert info["t"] == pytest.approx(r_info["t"], abs=1e-12)
        well_conditioned = info["concurrence"] >= 1.0 or r_info["concurrence"] > 1e-2
        tol = 1e-6 if well_conditioned else 3e-4
        assert reward == pytest.approx(r_reward, abs=tol)
    if scale == 1.0:
        assert rows[-1][3], "std 1.0 actions must hit the bound"
        assert rows[-1][1] == pytest.approx(-20.0 * (1 - 3 * (len(rows) - 1) / 1000))


def test_full_episode_replaying_the_paper_pulse(x64, pulse_dir):
    """Deltas of the paper's RL pulse, replayed: 333 steps, best reward at 17.25 ns, obs time feature."""
    env = make()
    amps, _ = quantgate_env.load_pulse_csv(pulse_dir / "RL_pulse.csv")
    actions = np.diff(np.concatenate([[0.0], amps])).reshape(333, 3) / 20.0

    def episode(actions):
        obs0, state = env.reset(jax.random.PRNGKey(0), env.default_params)

        def body(state, action):
            obs, state, reward, term, trunc, info = env.step(jax.random.PRNGKey(0), state, action, env.default_params)
            return state, (obs, reward, term, trunc, info)

        return obs0, jax.lax.scan(body, state, actions)[1]

    obs0, (obs, reward, term, trunc, info) = jax.jit(episode)(jnp.asarray(actions))
    reward, term, trunc = np.asarray(reward), np.asarray(term), np.asarray(trunc)
    assert env.max_episode_steps == 333 and obs.shape == (333, 28)
    assert not trunc.any() and term[-1] and not term[:-1].any()
    best = int(np.argmax(reward))
    assert float(info["t"][best]) == pytest.approx(17.25)
    assert float(info["JT"][best]) == pytest.approx(9.4857e-5, rel=1e-3)
    tv = 1e-3 * np.abs(np.diff(amps.reshape(333, 3), axis=1)).sum(axis=1)
    expected = -np.log10(np.asarray(info["JT"])) - (-np.log10(0.99)) - tv
    np.testing.assert_allclose(reward, expected, atol=1e-12)
    # time feature: reset and step 1 both read -0.9; step n reads 0.9 (2*3(n-1)/1000 - 1)
    assert float(obs0[-1]) == pytest.approx(-0.9)
    np.testing.assert_allclose(np.asarray(obs[:, -1]), 0.9 * (2 * 3 * np.arange(333) / 1000 - 1), atol=1e-12)
    assert float(np.asarray(obs[-1, -1])) == pytest.approx(0.8928)
    np.testing.assert_allclose(np.asarray(info["amps"]).reshape(-1), amps, atol=1e-6)  # float32 CSV values


def test_clip_mode_penalises_excess_exactly(x64):
    results = {}
    for lam in (0.0, 1.0):
        obs, state, reward, term, trunc, info = _first_step(make(oob_mode="clip", oob_penalty=lam), jnp.ones(3))
        assert not bool(trunc) and bool(info["oob"])
        np.testing.assert_allclose(np.asarray(info["amps"]), [20.0, 20.0, 20.0])
        results[lam] = float(reward)
    assert results[0.0] - results[1.0] == pytest.approx(3.0, abs=1e-9)  # excess 0 + 1 + 2


def test_terminate_mode_replaces_reward_and_truncates(x64):
    env = make()
    reset, step = _compiled(env)
    obs, state = reset(jax.random.PRNGKey(0), env.default_params)
    for _ in range(4):  # 12 samples climbing to 12 rad/ns
        obs, state, reward, term, trunc, info = step(jax.random.PRNGKey(0), state, jnp.full(3, 0.05), env.default_params)
    assert not bool(trunc)
    obs, state, reward, term, trunc, info = step(jax.random.PRNGKey(0), state, jnp.ones(3), env.default_params)
    assert bool(trunc) and bool(info["oob"]) and not bool(term)
    assert float(reward) == pytest.approx(-20 * (1 - 12 / 1000))
    assert np.abs(np.asarray(info["amps"])).max() == pytest.approx(20.0)


def test_actions_are_clipped_to_unit_box(x64):
    env = make()
    a = _first_step(env, [0.3, -5.0, 0.2])
    b = _first_step(env, [0.3, -1.0, 0.2])
    np.testing.assert_array_equal(np.asarray(a[0]), np.asarray(b[0]))


def test_reward_offset_is_configurable(x64):
    rewards = []
    for log_lim in (1e-2, 0.0):
        rewards.append(float(_first_step(make(log_lim=log_lim), jnp.full(3, 0.1))[2]))
    assert rewards[1] - rewards[0] == pytest.approx(-np.log10(0.99), abs=1e-12)
    assert make().config.reward_offset == pytest.approx(0.0043648, abs=1e-7)


def _autoreset_episode_devices(env, n_episodes_steps):
    step = jax.jit(env.step_autoreset)
    obs, state = env.reset(jax.random.PRNGKey(3), env.default_params)
    devices = [jax.tree.map(np.asarray, state.device)]
    key = jax.random.PRNGKey(4)
    for _ in range(n_episodes_steps):
        key, sub = jax.random.split(key)
        obs, state, reward, term, trunc, info = step(sub, state, jnp.zeros(3), env.default_params)
        if bool(term | trunc):
            devices.append(jax.tree.map(np.asarray, state.device))
            # the finished episode's last observation is kept; the returned one starts anew
            assert float(info["final_obs"][-1]) > -0.9
            assert int(state.idx) == 0 and float(obs[-1]) == pytest.approx(-0.9)
    return devices


@pytest.mark.parametrize("resample", [False, True])
def test_drift_persistence_across_autoresets(x64, resample):
    env = make(pulse_length=9, T=0.45, max_drift=1e-3, coupler_drift_mhz=50.0, g_drift_mhz=5.0, resample_drift=resample)
    devices = _autoreset_episode_devices(env, 3 * env.max_episode_steps)
    assert len(devices) == 4
    nominal = quantgate_env.nominal_device()
    first = devices[0]
    assert np.all(first.omega_q != nominal.omega_q) and first.omega_c != nominal.omega_c and np.all(first.g != nominal.g)
    assert np.all(np.abs(first.omega_q / nominal.omega_q - 1) <= 1e-3)
    assert abs(first.omega_c - nominal.omega_c) <= 0.05 and np.all(np.abs(first.g - nominal.g) <= 0.005)
    for later in devices[1:]:
        same = [np.array_equal(getattr(first, f), getattr(later, f)) for f in ("omega_q", "omega_c", "g")]
        assert all(same) if not resample else not any(same)


def test_extra_drift_keeps_the_qubit_draw(x64):
    key = jax.random.PRNGKey(11)
    base = make(max_drift=1e-3)
    extra = make(max_drift=1e-3, coupler_drift_mhz=5.7, g_drift_mhz=5.7)
    d0 = base.reset(key, base.default_params)[1].device
    d1 = extra.reset(key, extra.default_params)[1].device
    np.testing.assert_array_equal(np.asarray(d0.omega_q), np.asarray(d1.omega_q))
    assert float(d0.omega_c) == 7.445 and float(d1.omega_c) != 7.445


def test_named_drift_ranges_and_eval_params_are_nominal(x64):
    env = make(qubit_drift_mhz="recool")
    assert env.config.qubit_drift_mhz == 5.7
    devices = jax.vmap(lambda k: env.reset(k, env.default_params)[1].device)(jax.random.split(jax.random.PRNGKey(0), 256))
    shift = (np.asarray(devices.omega_q) - quantgate_env.nominal_device().omega_q) * 1e3
    assert np.abs(shift).max() <= 5.7 and np.abs(shift).max() > 5.0
    eval_device = env.reset(jax.random.PRNGKey(0), env.eval_params)[1].device
    np.testing.assert_array_equal(np.asarray(eval_device.omega_q), quantgate_env.nominal_device().omega_q)


def test_same_seed_same_trajectory(x64):
    env = make(max_drift=1e-3)
    actions = jnp.asarray(np.random.default_rng(0).normal(0, 0.1, size=(20, 3)))

    def run(key):
        obs, state = env.reset(key, env.default_params)
        def body(carry, a):
            state, key = carry
            key, sub = jax.random.split(key)
            obs, state, r, te, tr, info = env.step_autoreset(sub, state, a, env.default_params)
            return (state, key), (obs, r)
        return jax.lax.scan(body, (state, key), actions)[1]

    a, b, c = (jax.jit(run)(jax.random.PRNGKey(k)) for k in (5, 5, 6))
    np.testing.assert_array_equal(np.asarray(a[0]), np.asarray(b[0]))
    assert not np.array_equal(np.asarray(a[0]), np.asarray(c[0]))


def test_sqrt_iswap_objective_reports_fidelity_cost(x64):
    env = make(objective="sqrt_iswap", pulse_length=30, T=1.5)
    obs, state, reward, term, trunc, info = _first_step(env, jnp.full(3, 0.2))
    jt = float(info["JT"])
    assert 0 < jt < 1 and float(reward) == pytest.approx(-np.log10(jt) + np.log10(0.99) - 1e-3 * 8, abs=1e-9)


def test_functional_api_refuses_float32():
    env = make()
    with jax.enable_x64(False):
        with pytest.raises(ValueError, match=r"jax.enable_x64\(True\)"):
            env.reset(jax.random.PRNGKey(0), env.default_params)


@pytest.mark.parametrize(
    "options, match",
    [
        (dict(n_time_steps=0), r"n_time_steps: expected a positive integer, got 0"),
        (dict(pulse_length=2), r"pulse_length: expected at least n_time_steps = 3 samples, got 2"),
        (dict(max_drift=-1e-3), r"max_drift: expected a non-negative number"),
        (dict(oob_mode="bounce"), r"oob_mode: expected one of \('terminate', 'clip'\), got 'bounce'"),
        (dict(objective="cnot"), r"objective: expected one of"),
        (dict(T=float("nan")), r"T: expected a finite number"),
        (dict(qubit_drift_mhz="lunar"), r"qubit_drift_mhz: expected one of \('in_cooldown', 'recool', 'fab_targeting'\)"),
        (dict(log_lim=1.0), r"log_lim: expected a number in \[0, 1\)"),
        (dict(n_steps=3), r"unknown environment option\(s\) \['n_steps'\]"),
    ],
)
def test_config_errors_name_the_field(options, match):
    with pytest.raises(ValueError, match=match):
        make(**options)


def test_config_is_hashable_and_derived_sizes():
    assert hash(EnvConfig()) == hash(EnvConfig())
    cfg = EnvConfig(n_time_steps=15, delta_scale=4.0)
    assert (cfg.obs_dim, cfg.n_steps, cfg.delta_per_action) == (40, 66, 4.0)
    assert len(quantgate_env.observation_layout(3)) == 28
