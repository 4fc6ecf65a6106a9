"""The one core (issue 13): finished states, params inside jit, observe, action checks, float32 mode."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import quantgate_env
from quantgate_env import load_pulse_csv, make, make_multi, nominal_device, rollout_pulse
from quantgate_env.physics.hamiltonian import line_diagonals, sector_drift
from quantgate_env.physics.metrics import state_metrics
from quantgate_env.physics.propagation import initial_sector_state, propagate_samples_lines, taylor_plan, theta_bound
from quantgate_env.tools.pulses import PLAN_MARGIN

SHORT = dict(pulse_length=30, T=1.5)  # 10 steps of K = 3
KEY = jax.random.PRNGKey(0)
EPS32 = float(np.finfo(np.float32).eps)  # 1.19e-7


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


def _envs(**options):
    return [make(**options), make_multi(**options), make_multi(**options, action_mode="discrete")]


def _zero_action(env, scale=0.0):
    if isinstance(env, quantgate_env.GateEnv):
        return jnp.full(3, scale)
    if env.config.action_mode == "discrete":
        return {a: jnp.full(3, 4 if scale else 2, jnp.int32) for a in env.agents}
    return {a: jnp.full(3, scale) for a in env.agents}


def _leaves_equal(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def _leaves_close(a, b):
    """Equal up to rounding: one compiled call and another (or eager code) may round the time
    feature 2 idx / L - 1 differently in the last bit (XLA may divide by a constant as a product)."""
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=1e-15)


# ---- issue 13.5: params inside jit ----------------------------------------------------------------


@pytest.mark.parametrize("env", _envs(**SHORT), ids=["single", "multi", "discrete"])
def test_default_and_eval_params_work_inside_jit(x64, env):
    """They raised TracerArrayConversionError inside jit (np.asarray of a traced jnp.zeros)."""
    for name in ("default_params", "eval_params"):
        params = jax.jit(lambda: getattr(env, name))()
        _leaves_equal(params, getattr(env, name))
        obs, _ = jax.jit(lambda k: env.reset(k, getattr(env, name)))(KEY)  # noqa: B023
        assert np.isfinite(np.asarray(jax.tree.leaves(obs)[0])).all()


# ---- issue 13.5: finished episodes are frozen, or an error ---------------------------------------


def _play_to_the_end(env, step, action_scale=0.0):
    params = env.default_params
    _, state = env.reset(KEY, params)
    for _ in range(env.max_episode_steps):
        out = step(KEY, state, _zero_action(env, action_scale), params)
        state = out[1]
        terminated, truncated = out[3], out[4]
        flag = lambda x: bool(x if not isinstance(x, dict) else x[env.agents[0]])  # noqa: E731
        if flag(terminated) or flag(truncated):
            return out
    raise AssertionError("the episode did not end")


@pytest.mark.parametrize("scale", [0.0, 1.0], ids=["terminated", "truncated"])
@pytest.mark.parametrize("env", _envs(**SHORT), ids=["single", "multi", "discrete"])
def test_a_finished_state_is_frozen_inside_jit(x64, env, scale):
    """A step on a finished state returns the same state and observation, reward 0, flags set
    (before: it simulated past the 50 ns pulse, or on from the out-of-bounds truncation).
    Hold actions run to the pulse end; full deltas leave the bound (terminate mode truncates)."""
    step = jax.jit(env.step)
    obs, state, *_ = _play_to_the_end(env, step, action_scale=scale)
    assert bool(state.truncated) == (scale == 1.0) and bool(state.terminated) == (scale == 0.0)
    frozen = step(KEY, state, _zero_action(env, 1.0), env.default_params)
    obs2, state2, reward, terminated, truncated, info = frozen
    _leaves_equal(state2, state)
    _leaves_equal(obs2, obs)
    _leaves_close(obs2, env.observe(state))
    single = isinstance(env, quantgate_env.GateEnv)
    pick = (lambda x: x) if single else (lambda x: x[env.agents[0]])
    info = pick(info)
    assert float(pick(reward)) == 0.0
    assert bool(pick(terminated)) == bool(state.terminated) and bool(pick(truncated)) == bool(state.truncated)
    assert bool(pick(terminated)) or bool(pick(truncated))
    assert float(info["tv_penalty"]) == 0.0 and not bool(info["oob"])
    assert float(info["t"]) == pytest.approx(float(state.idx) * env.core.config.env.dt)


@pytest.mark.parametrize("env", _envs(**SHORT), ids=["single", "multi", "discrete"])
def test_an_eager_step_on_a_finished_state_is_an_error(x64, env):
    _, state, *_ = _play_to_the_end(env, jax.jit(env.step))
    with pytest.raises(RuntimeError, match=r"\.step: the episode already ended .*reset it first"):
        env.step(KEY, state, _zero_action(env), env.default_params)


@pytest.mark.parametrize("env", _envs(**SHORT), ids=["single", "multi", "discrete"])
def test_observe_returns_the_last_observation_and_next_episode_restarts(x64, env):
    params = env.default_params
    obs, state = env.reset(KEY, params)
    _leaves_close(env.observe(state), obs)
    step = jax.jit(env.step)
    for t in range(3):
        obs, state, *_ = step(KEY, state, _zero_action(env, 0.1 * t), params)
        _leaves_close(env.observe(state), obs)
    new_obs, new_state = env.next_episode(KEY, state, params)
    assert int(new_state.idx) == 0 and not bool(new_state.done)
    _leaves_close(new_obs, env.reset(KEY, params)[0])


def test_the_core_step_checks_action_kinds(x64):
    """The functional core itself refuses bool/complex/mis-shaped actions (before: adapters only)."""
    env = make(**SHORT)
    _, state = env.reset(KEY, env.default_params)
    with pytest.raises(ValueError, match=r"action: expected real numbers, got dtype bool"):
        env.step(KEY, state, jnp.ones(3, bool), env.default_params)
    with pytest.raises(ValueError, match=r"action: expected shape \(3,\), got \(2,\)"):
        env.step(KEY, state, jnp.zeros(2), env.default_params)
    multi = make_multi(**SHORT, action_mode="discrete")
    _, mstate = multi.reset(KEY, multi.default_params)
    with pytest.raises(ValueError, match=r"actions\['coupler'\]: expected integer level indices"):
        multi.step(KEY, mstate, {a: jnp.zeros(3) for a in multi.agents}, multi.default_params)


# ---- issue 13.4: float32 mode ---------------------------------------------------------------------


def _dtypes(tree) -> set[str]:
    return {str(jnp.result_type(leaf)) for leaf in jax.tree.leaves(tree)}


# Two of the four pairs (each compiles three envs): the drifting sqrt-iSWAP env, which runs the most
# code, without x64; the plain env with x64 on, where a Python float would turn float64. The plain
# env without x64 is what rejax trains in test_gymnax.py.
@pytest.mark.parametrize("options, x64_on", [
    (dict(SHORT, max_drift=1e-3, objective="sqrt_iswap"), False), (dict(SHORT), True)],
    ids=["drift-sqrt_iswap-x64-off", "plain-x64-on"])
def test_float32_env_traces_without_x64_and_is_float32_everywhere(options, x64_on):
    for env in _envs(**options, precision="float32"):
        with jax.enable_x64(x64_on):
            params = env.default_params
            obs, state = jax.jit(env.reset)(KEY, params)
            out = jax.jit(env.step_autoreset)(KEY, state, _zero_action(env, 0.2), params)
            leaves = (params, obs, state, out)
            assert _dtypes(leaves) <= {"float32", "complex64", "int32", "bool"}, _dtypes(leaves)
            assert np.isfinite(np.asarray(jax.tree.leaves(out[0])[0])).all()


def test_float64_env_still_refuses_to_trace_without_x64():
    with jax.enable_x64(False):
        with pytest.raises(ValueError, match=r"GateEnv.reset needs float64 physics") as info:
            make(**SHORT).reset(KEY, make(**SHORT).default_params)
    # Issue 37 row 4: rejax users (float32 stacks) met this error without the documented fix.
    assert 'precision="float32"' in str(info.value) and "jax.enable_x64(True)" in str(info.value)


def _jt_trace(amps: np.ndarray, dt: float, precision: str) -> np.ndarray:
    """J_T after every sample, propagated exactly as the core does in that precision."""
    plan = taylor_plan(PLAN_MARGIN * theta_bound(nominal_device(), float(np.abs(amps).max()), dt))
    f32 = precision == "float32"
    real, cplx = (jnp.float32, jnp.complex64) if f32 else (jnp.float64, jnp.complex128)
    diagonals = tuple(np.stack([d]) for d in line_diagonals("coupler"))

    def run(amps):
        device = jax.tree.map(lambda x: jnp.asarray(x, real), nominal_device())
        _, states = propagate_samples_lines(initial_sector_state(cplx), sector_drift(device, real), amps[:, None],
                                            diagonals, dt, plan, renormalised=f32)
        return jax.vmap(lambda s: state_metrics(s).JT)(states)

    with jax.enable_x64(not f32):
        return np.asarray(jax.jit(run)(jnp.asarray(amps, real)), np.float64)


def _paper_or_random(name, pulse_dir):
    if name == "random":
        return np.random.default_rng(0).uniform(-20, 20, 1000), 0.05
    return load_pulse_csv(pulse_dir / name)


@pytest.mark.parametrize("name", [
    "RL_pulse.csv",
    # ~11 s (each pulse has its own length, dt and plan: three compilations); the Krotov bad guess
    # stays in the default run with the same 5000 samples of dt = 0.01 ns and the same plan degree
    pytest.param("krotov_good_guess_pulse.csv", marks=pytest.mark.slow),
    "krotov_bad_guess_pulse.csv", "random"])
def test_float32_error_in_JT_is_bounded_by_float32_epsilon(name, pulse_dir):
    """float32 vs float64 J_T after every sample of the paper's pulses and a random one.

    Bound: (n + 32) eps32 after n samples, the error of n sample maps each exact to a relative
    float32 rounding of their unit-norm states (worst-case linear accumulation, J_T's sensitivity
    to the states is <= 1) plus the metric evaluation's own few dozen roundings (Weyl coordinates,
    concurrence). Measured (README): 3e-8 to 1e-5, at most 0.37 n eps32. The float64 path is exact to
    ~1e-14 (test_physics), so the difference is the float32 error.
    """
    amps, dt = _paper_or_random(name, pulse_dir)
    jt32, jt64 = _jt_trace(amps, dt, "float32"), _jt_trace(amps, dt, "float64")
    np.testing.assert_allclose(jt64, rollout_pulse(amps, dt=dt)["JT"], rtol=0, atol=1e-13)
    n = np.arange(1, amps.size + 1)
    bound = (n + 32) * EPS32
    assert (np.abs(jt32 - jt64) <= bound).all(), np.max(np.abs(jt32 - jt64) / bound)


def test_float32_env_reads_the_paper_rl_pulse_within_a_random_walk_of_epsilon(pulse_dir):
    """The float32 GateEnv on the paper's RL pulse at its gate time (17.25 ns, J_T 9.4857e-5).

    Bound sqrt(n) eps32 = 2.2e-6 for n = 345 samples: unbiased roundings of relative size eps32
    per sample add as a random walk, and re-normalising the sectors (what float32 mode does)
    removes the one biased part, the drift of the norms. Measured: ~3e-8 (without the
    re-normalisation ~2e-7; the reference's eigh-based float32 read 8e-6 instead of 9.5e-5).
    """
    amps, _ = load_pulse_csv(pulse_dir / "RL_pulse.csv")
    actions = np.diff(np.concatenate([[0.0], amps])).reshape(333, 3) / 20.0
    jts = {}
    for precision in ("float64", "float32"):
        env = make(precision=precision)
        with jax.enable_x64(precision == "float64"):
            def episode(actions, env=env):
                _, state = env.reset(KEY, env.eval_params)

                def body(state, action):
                    _, state, _, _, _, info = env.step(KEY, state, action, env.eval_params)
                    return state, info["JT"]

                return jax.lax.scan(body, state, actions)[1]

            jts[precision] = np.asarray(jax.jit(episode)(jnp.asarray(actions, env.core.float_dtype)), np.float64)
    best = 114  # step 115 ends at sample 345, t = 17.25 ns
    assert jts["float64"][best] == pytest.approx(9.4857e-5, rel=1e-4)
    assert abs(jts["float32"][best] - jts["float64"][best]) <= np.sqrt(345) * EPS32
