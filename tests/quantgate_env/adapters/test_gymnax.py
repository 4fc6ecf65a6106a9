"""quantgate_env.gymnax: a real gymnax 1.0 Environment, checked through its real clients (gymnax's
wrappers, a jit(vmap)+scan loop, rejax's PPO) against the functional core stepped directly."""

import copy
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.environments import environment, spaces
from gymnax.wrappers import FlattenObservationWrapper, LogWrapper

import quantgate_env
from quantgate_env import gymnax as qg

# Short pulses at the paper's 50 ps samples: 10 steps of K = 3 (the pulse ends the 10th step).
SHORT = dict(pulse_length=30, T=1.5)
N_STEPS = 10
# Resampled drift, so that every auto-reset draws a device with the step's key (the key discipline
# is part of what the comparison with the core checks).
DRIFT = dict(SHORT, qubit_drift_mhz=5.7)
N_ENVS, N_SCAN = 4, 25  # 25 steps cross the auto-resets after steps 10 and 20


@pytest.fixture(scope="module", autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def _actions(key, n_envs, dim):
    """Random deltas, large enough that some episodes leave the bound (truncated) and others
    reach the end of the pulse (terminated)."""
    return 0.2 * jax.random.normal(key, (n_envs, dim))


def _scan(step, reset, key, dim):
    """jit(vmap) + scan of ``step`` from ``reset`` with one key discipline for every client:
    env i at step t uses split(split(key)[t], N)[i]."""

    def run(key):
        reset_key, steps_key = jax.random.split(key)
        obs, state = jax.vmap(reset)(jax.random.split(reset_key, N_ENVS))

        def body(state, k):
            act_key, env_key = jax.random.split(k)
            out = jax.vmap(step)(jax.random.split(env_key, N_ENVS), state, _actions(act_key, N_ENVS, dim))
            return out[1], (out[0],) + out[2:]

        return obs, jax.lax.scan(body, state, jax.random.split(steps_key, N_SCAN))[1]

    return jax.jit(run)(key)


@pytest.fixture(scope="module")
def traces():
    """The same actions and keys through (1) the gymnax env, (2) LogWrapper(FlattenObservationWrapper),
    (3) the functional core's own auto-resetting step."""
    env = qg.make(**DRIFT)
    params = env.default_params
    wrapped = LogWrapper(FlattenObservationWrapper(env))
    core = env.core
    key = jax.random.PRNGKey(7)
    plain = _scan(lambda k, s, a: env.step(k, s, a, params), lambda k: env.reset(k, params), key, 3)
    logged = _scan(lambda k, s, a: wrapped.step(k, s, a, params), lambda k: wrapped.reset(k, params), key, 3)
    direct = _scan(lambda k, s, a: core.step_autoreset(k, s, a, core.default_params),
                   lambda k: core.reset(k, core.default_params), key, 3)
    return jax.device_get((plain, logged, direct))


def test_import_quantgate_env_imports_no_jax_rl_stack():
    code = "import sys, quantgate_env; print(sorted(m for m in ('gymnax', 'jaxmarl', 'flax', 'rejax') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_is_a_gymnax_environment_with_gymnax_spaces_and_params():
    env = qg.make(**SHORT)
    assert isinstance(env, environment.Environment)
    params = env.default_params
    assert params.max_steps_in_episode == N_STEPS
    assert params.replace(max_steps_in_episode=4).max_steps_in_episode == 4
    obs_space, act_space = env.observation_space(params), env.action_space(params)
    assert isinstance(obs_space, spaces.Box) and isinstance(act_space, spaces.Box)
    assert obs_space.shape == (28,) and obs_space.dtype == jnp.float32
    assert (obs_space.low, obs_space.high) == (-0.9, 0.9)
    assert act_space.shape == (3,) and (act_space.low, act_space.high) == (-1.0, 1.0)
    assert env.num_actions == 3 and env.name == "ZCQPEE-v0"
    # a frozen dataclass: copies are equal and hash alike (one compilation for all of them)
    twin = copy.deepcopy(env)
    assert twin == env and hash(twin) == hash(env)


def test_vmapped_scanned_steps_equal_the_core_stepped_directly(traces):
    (obs0, (obs, reward, terminated, truncated, info)), _, (core_obs0, core) = traces
    core_obs, core_reward, core_terminated, core_truncated, core_info = core
    # both episode ends occur in the trace, each followed by an auto-reset
    assert terminated.any() and truncated.any()
    np.testing.assert_array_equal(terminated, core_terminated)
    np.testing.assert_array_equal(truncated, core_truncated)
    assert obs.dtype == np.float32 and reward.dtype == np.float32
    np.testing.assert_allclose(obs0, core_obs0.astype(np.float32), rtol=0, atol=1e-6)
    np.testing.assert_allclose(obs, core_obs.astype(np.float32), rtol=0, atol=1e-6)
    np.testing.assert_allclose(reward, core_reward.astype(np.float32), rtol=1e-6)
    np.testing.assert_allclose(info["final_observation"], core_info["final_obs"].astype(np.float32), rtol=0, atol=1e-6)
    np.testing.assert_allclose(info["JT"], core_info["JT"], rtol=1e-9)
    np.testing.assert_array_equal(info["terminated"], terminated)
    np.testing.assert_array_equal(info["truncated"], truncated)


def test_gymnax_log_and_flatten_wrappers_report_the_cores_episodes(traces):
    _, (_, (obs, reward, terminated, truncated, info)), (_, core) = traces
    core_reward, core_done = core[1], core[2] | core[3]
    np.testing.assert_array_equal(info["returned_episode"], core_done)
    np.testing.assert_allclose(obs, traces[2][1][0].astype(np.float32), rtol=0, atol=1e-6)
    # episode returns and lengths recomputed from the core's own rewards and ends
    for i in range(N_ENVS):
        ret, length = 0.0, 0
        for t in range(N_SCAN):
            ret, length = ret + core_reward[t, i], length + 1
            if core_done[t, i]:
                assert info["returned_episode_lengths"][t, i] == length
                assert info["returned_episode_returns"][t, i] == pytest.approx(ret, rel=1e-5)
                assert length == N_STEPS or core[3][t, i]  # shorter only when truncated
                ret, length = 0.0, 0
    assert info["returned_episode_valid"][-1].all()


def test_time_limit_truncates_resets_and_keeps_the_final_observation():
    env = qg.make(**DRIFT)
    params = env.default_params.replace(max_steps_in_episode=4)
    core, core_step, core_reset = env.core, jax.jit(env.core.step), jax.jit(env.core.reset)
    key = jax.random.PRNGKey(3)
    obs, state = env.reset(key, params)
    core_obs, core_state = core_reset(key, core.default_params)
    action = jnp.array([0.2, -0.1, 0.05])
    for t in range(4):
        k = jax.random.fold_in(key, t)
        obs, state, reward, terminated, truncated, info = env.step(k, state, action, params)
        core_out = core_step(k, core_state, action, core.default_params)
        core_state = core_out[1]
        assert not terminated and bool(truncated) == (t == 3)
    np.testing.assert_allclose(info["final_observation"], np.float32(core_out[0]), atol=1e-6)
    reset_obs, reset_state = core_reset(k, core.default_params)  # the reset uses the step's key
    np.testing.assert_allclose(obs, np.float32(reset_obs), atol=1e-6)
    assert int(state.time) == 0 and int(state.core.idx) == 0
    np.testing.assert_array_equal(state.core.device.omega_q, reset_state.device.omega_q)


def test_step_env_on_a_finished_episode_simulates_nothing():
    env = qg.make(**DRIFT)
    params = env.default_params
    step_env = jax.jit(env.step_env)
    _, state = env.reset(jax.random.PRNGKey(0), params)
    for t in range(N_STEPS):
        obs, state, reward, terminated, _ = step_env(jax.random.PRNGKey(t), state, jnp.zeros(3), params)
    assert terminated and np.isfinite(obs).all() and np.isfinite(reward)
    last_obs = obs
    obs, after, reward, terminated, _ = step_env(jax.random.PRNGKey(99), state, jnp.ones(3), params)
    # the core's frozen state: same state and observation, reward 0, the flags kept
    assert terminated and float(reward) == 0.0
    np.testing.assert_array_equal(obs, last_obs)
    assert int(after.core.idx) == int(state.core.idx) == 30 and int(after.time) == N_STEPS
    for a, b in zip(jax.tree.leaves(after), jax.tree.leaves(state)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("resample", [True, False])
def test_autoreset_keeps_a_fixed_drift_device_and_redraws_a_resampled_one(resample):
    for core in (quantgate_env.make(**DRIFT, resample_drift=resample),
                 quantgate_env.make_multi(**DRIFT, resample_drift=resample)):
        _, state = core.reset(jax.random.PRNGKey(0), core.default_params)
        _, new = core.next_episode(jax.random.PRNGKey(1), state, core.default_params)
        _, drawn = core.reset(jax.random.PRNGKey(1), core.default_params)
        expected = drawn.device if resample else state.device
        np.testing.assert_array_equal(new.device.omega_q, expected.omega_q)
        assert not np.array_equal(drawn.device.omega_q, state.device.omega_q)  # the two draws differ


def test_multi_line_env_assembles_every_lines_amplitudes():
    env = qg.make_multi(**SHORT)
    params = env.default_params
    assert env.observation_space(params).shape == (24 + 9 + 1,) and env.action_space(params).shape == (9,)
    core = env.core
    key = jax.random.PRNGKey(5)
    obs, state = env.reset(key, params)
    _, core_state = core.reset(key, params.core)
    action = jnp.array([0.3, 0.1, -0.2, 0.2, 0.1, 0.1, -0.4, 0.0, 0.2])  # every line stays in bounds
    obs, state, reward, terminated, truncated, info = env.step(key, state, action, params)
    assert not (terminated or truncated)
    core_obs, _, core_reward, _, _, core_info = jax.jit(core.step)(
        key, core_state, {"coupler": action[:3], "q0": action[3:6], "q1": action[6:]}, params.core)
    expected = np.concatenate([core_obs["coupler"][:24], core_obs["coupler"][24:27], core_obs["q0"][24:27],
                               core_obs["q1"][24:27], core_obs["coupler"][-1:]])
    np.testing.assert_allclose(obs, expected.astype(np.float32), atol=1e-6)
    assert reward == pytest.approx(float(core_reward["q1"]), rel=1e-6)
    assert info["amps"].shape == (3, 3) and info["cost"].shape == (3,)
    np.testing.assert_allclose(info["amps"][1], core_info["q0"]["amps"], rtol=1e-12)
    assert info["JT"] == pytest.approx(float(core_info["coupler"]["JT"]), rel=1e-9)


def test_bad_input_is_a_clear_error_before_anything_runs():
    env = qg.make(**SHORT)
    params = env.default_params
    _, state = env.reset(jax.random.PRNGKey(0), params)
    with pytest.raises(ValueError, match=r"action: expected shape \(3,\), got \(2,\)"):
        env.step(jax.random.PRNGKey(0), state, jnp.zeros(2), params)
    with pytest.raises(ValueError, match="params: expected quantgate_env.gymnax.GymnaxParams"):
        env.step(jax.random.PRNGKey(0), state, jnp.zeros(3), env.core.default_params)
    with pytest.raises(ValueError, match="unknown environment option"):
        qg.make(pulse_lenght=30)
    with pytest.raises(ValueError, match='action_mode: the gymnax multi-line environment takes continuous actions only'):
        qg.make_multi(**SHORT, action_mode="discrete")
    with pytest.raises(ValueError, match="env: expected a quantgate_env.gymnax environment"):
        qg.LegacyStepView(env.core)
    with jax.enable_x64(False), pytest.raises(ValueError, match="enable_x64"):
        env.reset(jax.random.PRNGKey(0), params)  # the core's own check, with the fix in the message


def test_legacy_view_gives_five_values_and_survives_deepcopy():
    env = qg.make(**DRIFT)
    view = qg.LegacyStepView(env)
    twin = copy.deepcopy(view)
    assert twin == view and hash(twin) == hash(view) and twin.env == env
    params = view.default_params
    assert view.action_space(params).shape == (3,) and view.name == env.name
    _, state = view.reset(jax.random.PRNGKey(0), params)
    dones = []
    for t in range(N_STEPS):
        out = twin.step(jax.random.PRNGKey(t), state, jnp.zeros(3), params)
        assert len(out) == 5
        obs, state, reward, done, info = out
        dones.append(bool(done))
        assert bool(done) == bool(info["terminated"] | info["truncated"])
    assert dones == [False] * (N_STEPS - 1) + [True]


@pytest.mark.slow  # ~17 s; rejax trains the same view in float32 in the default run (below)
def test_rejax_ppo_trains_on_the_legacy_view_with_no_glue():
    """rejax 0.1.3 PPO through its documented calls only (create, train under jit)."""
    from rejax import PPO

    env = qg.LegacyStepView(qg.make(**SHORT, oob_mode="clip"))
    # A limit beyond the pulse's 10 steps: evaluation episodes must end by the env's own done.
    params = env.default_params.replace(max_steps_in_episode=N_STEPS + 5)
    algo = PPO.create(env=env, env_params=params, num_envs=8, num_steps=16, num_epochs=1, num_minibatches=2,
                      total_timesteps=128, eval_freq=128, skip_initial_evaluation=True)
    train_state, (lengths, returns) = jax.jit(algo.train)(jax.random.PRNGKey(0))
    assert int(train_state.global_step) == 128
    lengths, returns = np.asarray(lengths), np.asarray(returns)
    assert lengths.shape == returns.shape == (1, 128)  # one evaluation of 128 episodes
    assert (lengths == N_STEPS).all()
    assert np.isfinite(returns).all()
    # per step: -log10(J_T) <= 12 at best; at worst (clip mode, full deltas from the bound) the
    # normalised excess of the three samples sums to 1 + 2 + 3 = 6, plus a TV penalty < 0.1
    assert (returns <= 12 * N_STEPS).all() and (returns >= -7 * N_STEPS).all()


def test_rejax_on_the_float64_env_without_x64_names_the_float32_option():
    """Issue 37 row 4: rejax (a float32 stack) on the default float64 env without x64 got a clear
    error that did not mention precision="float32", the documented fix."""
    from rejax import PPO

    with jax.enable_x64(False):
        env = qg.LegacyStepView(qg.make(**SHORT, oob_mode="clip"))
        algo = PPO.create(env=env, env_params=env.default_params, num_envs=2, num_steps=4,
                          num_epochs=1, num_minibatches=1, total_timesteps=8, eval_freq=8,
                          skip_initial_evaluation=True)
        with pytest.raises(ValueError, match="needs float64 physics") as info:
            jax.jit(algo.train)(jax.random.PRNGKey(0))
    assert 'quantgate_env.gymnax.make(precision="float32")' in str(info.value)


@pytest.mark.slow
def test_rejax_ppo_learns_on_the_gymnax_env():
    """Learning, not just running: rejax PPO's evaluation return rises on the 10-step clip-mode MDP.

    Measured (seeds 0 and 1, 40960 steps, ~40 s on 2 CPUs): the mean return of rejax's 128
    evaluation episodes goes from -4.7 / -4.5 (random initial policy: out-of-bounds excess paid in
    clip mode) to 5.25 / 5.28, a rise of 9.9 / 9.8; the test asks for half that rise.
    """
    from rejax import PPO

    env = qg.LegacyStepView(qg.make(**SHORT, oob_mode="clip"))
    algo = PPO.create(env=env, num_envs=16, num_steps=32, num_epochs=4, num_minibatches=4,
                      total_timesteps=40960, eval_freq=8192, learning_rate=1e-3)
    _, (lengths, returns) = jax.jit(algo.train)(jax.random.PRNGKey(0))
    mean = np.asarray(returns).mean(axis=1)
    assert (np.asarray(lengths) == N_STEPS).all()
    assert mean[-1] - mean[0] > 5.0, mean
    assert mean[-1] > 3.0, mean  # the trained policy stays in bounds and is paid for the gate


@pytest.mark.parametrize("precision", [
    # ~14 s; the float64 gymnax envs are traced under x64 in the default run: the single-line one
    # vmapped and scanned across episode ends (test_vmapped_scanned_steps_equal_the_core_stepped_directly,
    # JT equal to the float64 core's to 1e-9), the multi-line one stepped in
    # test_multi_line_env_assembles_every_lines_amplitudes
    pytest.param("float64", marks=pytest.mark.slow),
    "float32"])
def test_both_precisions_trace_and_float32_needs_no_x64(precision):
    """float32 envs traced with x64 OFF (as in a float32 program); float64 under x64."""
    with jax.enable_x64(precision == "float64"):
        for env in (qg.make(**SHORT, oob_mode="clip", precision=precision),
                    qg.make_multi(**SHORT, oob_mode="clip", precision=precision)):
            params = env.default_params
            dim = env.num_actions

            def run(key, env=env, params=params, dim=dim):
                obs, state = env.reset(key, params)

                def body(state, k):
                    obs, state, reward, terminated, truncated, info = env.step(k, state, jnp.full(dim, 0.1), params)
                    return state, (obs, reward, terminated | truncated, info["JT"])

                return jax.lax.scan(body, state, jax.random.split(key, N_STEPS + 2))[1]

            obs, reward, done, jt = jax.jit(run)(jax.random.PRNGKey(0))
            assert obs.dtype == reward.dtype == jnp.float32
            assert jt.dtype == (jnp.float32 if precision == "float32" else jnp.float64)
            assert np.isfinite(obs).all() and np.isfinite(reward).all() and bool(done[N_STEPS - 1])


def test_rejax_ppo_trains_in_float32_without_x64():
    """rejax's whole program in float32: no global x64 (which broke its normalisation), no glue."""
    from rejax import PPO

    with jax.enable_x64(False):
        env = qg.LegacyStepView(qg.make(**SHORT, oob_mode="clip", precision="float32"))
        params = env.default_params.replace(max_steps_in_episode=N_STEPS + 5)
        algo = PPO.create(env=env, env_params=params, num_envs=8, num_steps=16, num_epochs=1, num_minibatches=2,
                          total_timesteps=128, eval_freq=128, skip_initial_evaluation=True, normalize_observations=True,
                          normalize_rewards=True)
        train_state, (lengths, returns) = jax.jit(algo.train)(jax.random.PRNGKey(0))
        assert int(train_state.global_step) == 128
        lengths, returns = np.asarray(lengths), np.asarray(returns)
        assert (lengths == N_STEPS).all() and np.isfinite(returns).all()
        assert (returns <= 12 * N_STEPS).all() and (returns >= -7 * N_STEPS).all()
