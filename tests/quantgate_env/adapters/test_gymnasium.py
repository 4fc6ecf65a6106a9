"""Gymnasium adapters: the ecosystems' own checkers, vector semantics, and a real SB3 client."""

import gymnasium
import numpy as np
import pytest
import quantgate_env  # noqa: F401  (registers ZCQPEE-v0)
from gymnasium.utils.env_checker import check_env as gym_check_env
from quantgate_env.adapters.gymnasium import GateGymEnv, GateVectorEnv

SHORT = dict(pulse_length=30, T=1.5)  # 10 steps of 3 samples: same code path, quick episodes


def test_make_gives_the_paper_env():
    env = gymnasium.make("quantgate_env:ZCQPEE-v0")
    assert env.observation_space.shape == (28,) and env.observation_space.dtype == np.float32
    assert env.action_space.shape == (3,) and env.action_space.dtype == np.float32
    assert np.all(env.action_space.low == -1) and np.all(env.action_space.high == 1)
    obs, info = env.reset(seed=0)
    assert obs.dtype == np.float32 and obs[-1] == pytest.approx(-0.9)
    obs, reward, term, trunc, info = env.step(np.array([0.05, 0.05, 0.05], dtype=np.float32))
    assert set(info) >= {"JT", "concurrence", "unitarity", "tv_penalty", "oob", "t", "amps"}
    assert info["t"] == pytest.approx(0.15) and not term and not trunc
    assert reward == pytest.approx(-np.log10(info["JT"]) + np.log10(0.99) - info["tv_penalty"])


@pytest.mark.parametrize("options", [dict(oob_mode="clip"), dict(n_time_steps=15, delta_scale=4.0)])
def test_gymnasium_check_env(options):
    gym_check_env(GateGymEnv(**options), skip_render_check=True)


def test_gymnasium_checker_on_paper_defaults_only_trips_on_the_bound():
    """The paper MDP truncates as soon as |u| > 20 rad/ns; Gymnasium's checker samples a random
    action whose cumulative deltas leave the bound at step 1 and calls that 'something has gone
    very wrong'. Every other check passes (the clip-mode and K=15 configs pass in full above)."""
    env = GateGymEnv()
    env.action_space.seed(123)
    action = env.action_space.sample()
    assert np.abs(np.cumsum(action) * 20).max() > 20
    with pytest.raises(AssertionError, match="truncates after 1 step"):
        gym_check_env(env, skip_render_check=True)


def test_sb3_check_env_on_paper_defaults():
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    sb3_check_env(GateGymEnv(), warn=True)
    sb3_check_env(GateGymEnv(oob_mode="clip"), warn=True)


def test_reset_seed_is_deterministic_and_actions_are_clipped():
    env = GateGymEnv(max_drift=1e-3)
    runs = []
    for seed in (3, 3, 4):
        env.reset(seed=seed)
        runs.append(env.step(np.array([0.1, 0.0, -0.1]))[0])
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])  # another device drawn
    env.reset(seed=0)
    clipped = env.step(np.array([2.0, -7.0, 0.0]))[0]
    env.reset(seed=0)
    np.testing.assert_array_equal(clipped, env.step(np.array([1.0, -1.0, 0.0]))[0])


@pytest.mark.parametrize("bad, match", [
    (np.array([np.nan, 0.0, 0.0]), "action: expected finite values"),
    (np.zeros(4), r"action: expected shape \(3,\), got \(4,\)"),
    ("up", "action: expected an array of real numbers"),
])
def test_bad_actions_raise(bad, match):
    env = GateGymEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match=match):
        env.step(bad)


def test_fixed_drift_keeps_the_device_across_resets():
    env = GateGymEnv(max_drift=1e-3, coupler_drift_mhz=20.0, resample_drift=False)
    env.reset(seed=1)
    first = env._state.device
    env.reset()
    env.reset()
    np.testing.assert_array_equal(np.asarray(first.omega_q), np.asarray(env._state.device.omega_q))
    assert float(first.omega_c) == float(env._state.device.omega_c) != 7.445


def test_vector_env_matches_single_envs_and_autoresets_next_step():
    n = 3
    venv = gymnasium.make_vec("quantgate_env:ZCQPEE-v0", num_envs=n, vectorization_mode="vector_entry_point", **SHORT)
    assert venv.metadata["autoreset_mode"] == gymnasium.vector.AutoresetMode.NEXT_STEP
    assert venv.observation_space.shape == (n, 28)
    single = GateGymEnv(**SHORT)
    rng = np.random.default_rng(0)
    actions = rng.normal(0, 0.1, size=(12, n, 3))
    actions[2, 1] = 1.0  # env 1 leaves the bound at step 3 and truncates
    obs, _ = venv.reset(seed=0)
    single_obs = [single.reset(seed=0)[0] for _ in range(n)]
    np.testing.assert_allclose(obs, np.stack(single_obs), atol=0)
    done_prev = np.zeros(n, bool)
    for t in range(12):
        obs, reward, term, trunc, info = venv.step(actions[t])
        assert np.all(reward[done_prev] == 0) and not np.any((term | trunc)[done_prev])
        assert np.all(obs[done_prev, -1] == pytest.approx(-0.9))  # reset observation
        if t == 2:
            assert trunc[1] and not trunc[0] and not trunc[2]
        if t == 9:
            assert term[0] and term[2]  # 10 steps of 3 samples end the 30-sample pulse
        done_prev = term | trunc
    with pytest.raises(ValueError, match=r"actions: expected shape \(3, 3\)"):
        venv.step(np.zeros((2, 3)))


def test_vector_env_spaces_are_batched_single_spaces():
    from gymnasium.vector.utils import batch_space

    # 3 envs: the compiled batch of test_vector_env_matches_single_envs_and_autoresets_next_step
    venv = GateVectorEnv(num_envs=3, **SHORT)
    assert venv.action_space == batch_space(venv.single_action_space, 3)
    obs, _ = venv.reset(seed=5)
    assert venv.observation_space.contains(obs)
    obs2, *_ = venv.step(venv.action_space.sample() * 0.05)
    assert venv.observation_space.contains(obs2)


@pytest.mark.slow  # ~13 s; SB3 steps the env in test_sb3.py (DummyVecEnv, step for step; TRPO learns)
def test_sb3_ppo_trains_and_its_episode_statistics_match_the_env():
    """A real client: SB3 PPO on the Gymnasium env; the episode returns and lengths it logs
    (Monitor) equal the sums of the rewards the env reported for those episodes."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.monitor import Monitor

    class Recorder(gymnasium.Wrapper):
        def reset(self, **kw):
            self.episodes = getattr(self, "episodes", [])
            self.episodes.append([])
            return self.env.reset(**kw)

        def step(self, action):
            out = self.env.step(action)
            self.episodes[-1].append(out[1])
            return out

    recorder = Recorder(GateGymEnv(pulse_length=60, T=3.0))
    env = Monitor(recorder)
    model = PPO("MlpPolicy", env, n_steps=256, batch_size=64, n_epochs=2, seed=0, device="cpu")
    model.learn(total_timesteps=1024)
    returns, lengths = env.get_episode_rewards(), env.get_episode_lengths()
    finished = [ep for ep in recorder.episodes if ep][: len(returns)]
    assert len(returns) >= 10
    np.testing.assert_allclose(returns, [sum(ep) for ep in finished], rtol=1e-6)
    assert lengths == [len(ep) for ep in finished]
    assert max(lengths) <= 20 and all(n >= 1 for n in lengths)
    action, _ = model.predict(recorder.reset(seed=0)[0], deterministic=True)
    assert action.shape == (3,)


def test_sb3_make_vec_env_by_id():
    """SB3's make_vec_env passes render_mode="rgb_array"; the id must work as it is."""
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env("quantgate_env:ZCQPEE-v0", n_envs=2, env_kwargs=SHORT)
    assert venv.reset().shape == (2, 28)
    obs, reward, done, info = venv.step(np.zeros((2, 3), dtype=np.float32))
    assert obs.shape == (2, 28) and np.all(np.isfinite(reward))
    with pytest.raises(ValueError, match="render_mode: expected None or a string"):
        GateGymEnv(render_mode=3)
