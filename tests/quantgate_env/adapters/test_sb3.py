"""SB3 vector env (``quantgate_env.sb3``): SB3's DummyVecEnv as the reference, SB3's wrappers and algorithms as clients."""

import functools
import subprocess
import sys

import gymnasium
import numpy as np
import pytest
import quantgate_env
import quantgate_env.adapters.sb3 as sb3_adapter
from quantgate_env.adapters.gymnasium import GateVectorEnv

SHORT = dict(pulse_length=30, T=1.5)  # 10 steps of 3 samples: the paper's code path, quick episodes
N = 3
STEPS = 25  # two and a half episodes
# resampled drift: each reset draws a device, so equal outputs also mean equal key chains
DRIFT = dict(SHORT, qubit_drift_mhz="recool", coupler_drift_mhz=20.0)


def _actions(rng_seed=0):
    actions = np.random.default_rng(rng_seed).normal(0, 0.1, size=(STEPS, N, 3)).astype(np.float32)
    actions[2, 1] = 1.0  # env 1 leaves |u| <= 20 rad/ns at step 3 (terminate mode: truncated there)
    actions[14, 0] = -1.0  # env 0, in its second episode, at step 5 of it
    return actions


def _dummy(options, seed):
    from stable_baselines3.common.vec_env import DummyVecEnv

    venv = DummyVecEnv([functools.partial(gymnasium.make, "quantgate_env:ZCQPEE-v0", **options)] * N)
    venv.seed(seed)
    return venv


def _row(device):
    return np.concatenate([np.ravel(device.omega_q), np.ravel(device.omega_c), np.ravel(device.g)])


def _devices(venv):
    """(N, 5) per env: its qubit and coupler frequencies and couplings (GHz), as drawn."""
    device = venv.states.device
    return np.concatenate([np.asarray(device.omega_q), np.asarray(device.omega_c)[:, None], np.asarray(device.g)], axis=1)


def _assert_same_reset(ours, reference, what):
    obs, ref_obs = ours.reset(), reference.reset()
    assert obs.dtype == ref_obs.dtype == np.float32 and obs.shape == ref_obs.shape == (N, 28)
    np.testing.assert_allclose(obs, ref_obs, rtol=1e-6, atol=1e-6, err_msg=what)
    assert obs.flags.writeable  # as DummyVecEnv's (torch warns on read-only arrays)
    assert ours.reset_infos == reference.reset_infos == [{}] * N


def _assert_same_step(ours, reference, t):
    obs, reward, done, infos = ours
    ref_obs, ref_reward, ref_done, ref_infos = reference
    # Both sides run on this machine; the batched (vmapped) step may round in the last bit where
    # XLA vectorises it differently from the single step, so float32 outputs get a few ulps and
    # float64 info entries 1e-12 relative (exact on the machine this was written on).
    assert obs.dtype == ref_obs.dtype == np.float32 and obs.shape == ref_obs.shape
    np.testing.assert_allclose(obs, ref_obs, rtol=1e-6, atol=1e-6, err_msg=f"obs at step {t}")
    assert obs.flags.writeable
    assert reward.dtype == ref_reward.dtype == np.float32
    np.testing.assert_allclose(reward, ref_reward, rtol=1e-6, atol=1e-6, err_msg=f"reward at step {t}")
    np.testing.assert_array_equal(done, ref_done, err_msg=f"dones at step {t}")
    assert len(infos) == len(ref_infos) == N
    for i, (info, ref) in enumerate(zip(infos, ref_infos)):
        assert set(info) == set(ref), f"info keys of env {i} at step {t}"
        assert info["TimeLimit.truncated"] is ref["TimeLimit.truncated"]
        for key in set(ref) - {"TimeLimit.truncated"}:
            value, expected = np.asarray(info[key]), np.asarray(ref[key])
            assert value.dtype == expected.dtype and value.shape == expected.shape, (key, i, t)
            if value.dtype.kind == "b":
                np.testing.assert_array_equal(value, expected, err_msg=f"info[{key!r}] of env {i} at step {t}")
            else:
                tol = 1e-6 if value.dtype == np.float32 else 1e-12
                np.testing.assert_allclose(value, expected, rtol=tol, atol=tol, err_msg=f"info[{key!r}] of env {i} at step {t}")


@pytest.mark.parametrize("options, mode", [
    (dict(DRIFT, oob_mode="terminate"), "terminate"),
    (dict(DRIFT, oob_mode="clip"), "clip"),
    (dict(DRIFT, oob_mode="terminate", resample_drift=False), "terminate, fixed drift"),
])
def test_matches_sb3_dummy_vec_env_step_for_step(options, mode):
    """The outputs equal SB3's DummyVecEnv over gymnasium.make, step for step.

    Same seeds, same actions: observations, rewards, dones and every info entry (terminal_observation
    and TimeLimit.truncated included), across early out-of-bounds ends, auto-resets, and explicit
    resets with and without a new seed.
    """
    ours = quantgate_env.sb3.make_vec_env(N, seed=7, monitor=False, **options)
    reference = _dummy(options, seed=7)
    _assert_same_reset(ours, reference, "the first reset")
    first_devices = _devices(ours)
    ends = []
    for t, action in enumerate(_actions()):
        step = ours.step(action)
        _assert_same_step(step, reference.step(action), t)
        obs, _, done, infos = step
        for i in np.flatnonzero(done):
            ends.append((t, i, infos[i]["TimeLimit.truncated"]))
            terminal = infos[i]["terminal_observation"]
            assert terminal.dtype == np.float32 and terminal.shape == (28,)
            assert obs[i, -1] == np.float32(-0.9) != terminal[-1]  # a new episode's first observation
    pulse_ends = [(9, i, False) for i in range(N)] + [(19, i, False) for i in range(N)]
    if mode == "clip":
        assert ends == sorted(pulse_ends)  # every episode runs to the end of the pulse, all together
    else:
        # env 1 truncated at step 3 and env 0 at step 5 of its second episode; each restarted at once
        assert (2, 1, True) in ends and (14, 0, True) in ends
        assert (9, 1, False) not in ends and (19, 0, False) not in ends and (12, 1, False) in ends
    # the devices in use are SB3's (drawn by the same key chains), one per env
    devices = _devices(ours)
    np.testing.assert_allclose(devices, np.stack([_row(s.device) for s in reference.get_attr("_state")]), rtol=1e-12)
    assert len({tuple(row) for row in devices}) == N
    if mode == "terminate, fixed drift":  # each env keeps its device across episodes
        np.testing.assert_array_equal(devices, first_devices)
    else:  # every env finished an episode, so every env drew a new device
        assert not np.any(np.all(devices == first_devices, axis=1))
    # reset() again: the next episode by the core's rule; then with a new seed
    _assert_same_reset(ours, reference, "reset() after the episodes")
    for seed in (11, None):
        if seed is not None:
            ours.seed(seed)
            reference.seed(seed)
        _assert_same_reset(ours, reference, f"reset(seed={seed})")
        for t, action in enumerate(_actions(seed or 1)[:4]):
            _assert_same_step(ours.step(action), reference.step(action), f"{t} after reset(seed={seed})")


def test_importing_quantgate_env_imports_neither_sb3_nor_torch():
    """quantgate-env depends on neither: the SB3 subclass is built when first asked for."""
    code = ("import sys, quantgate_env, quantgate_env.sb3, quantgate_env.adapters.sb3\n"
            "before = sorted(m for m in ('stable_baselines3', 'torch') if m in sys.modules)\n"
            "cls = quantgate_env.sb3.GateSB3VecEnv\n"
            "from stable_baselines3.common.vec_env import VecEnv\n"
            "print(before, issubclass(cls, VecEnv), cls is quantgate_env.adapters.sb3.GateSB3VecEnv)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "True", "True"]


def test_sb3_takes_it_as_its_own_vec_env_and_its_wrappers_work():
    """SB3's _wrap_env keeps it as it is (no DummyVecEnv around it); SB3's wrappers run over it.

    VecCheckNan (SB3's check of a VecEnv's outputs), VecNormalize and VecMonitor over whole episodes.
    SB3's env_checker.check_env takes a single gymnasium.Env only (test_gymnasium.py runs it on GateGymEnv).
    """
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecCheckNan, VecEnv, VecMonitor, VecNormalize

    options = dict(DRIFT, oob_mode="terminate")
    venv = quantgate_env.sb3.make_vec_env(N, seed=0, monitor=False, **options)
    assert isinstance(venv, VecEnv) and isinstance(venv, sb3_adapter.GateSB3VecEnv)
    assert PPO._wrap_env(venv) is venv
    assert venv.observation_space == venv.get_attr("observation_space")[0] == venv.core.observation_space
    assert venv.num_envs == N and venv.get_attr("render_mode", indices=[0, 2]) == [None, None]
    assert venv.env_is_wrapped(VecMonitor) == [False] * N and not venv.has_attr("nonexistent")
    wrapped = VecNormalize(VecCheckNan(VecMonitor(venv), raise_exception=True))
    wrapped.reset()
    episodes = []
    for action in _actions():
        obs, reward, done, infos = wrapped.step(action)
        assert obs.shape == (N, 28) and np.all(np.isfinite(obs)) and np.all(np.isfinite(reward))
        episodes += [infos[i]["episode"] for i in np.flatnonzero(done)]
    assert len(episodes) >= 2 * N and all(1 <= ep["l"] <= 10 for ep in episodes)
    assert isinstance(quantgate_env.sb3.make_vec_env(N, **options), VecMonitor)  # monitor=True by default


def _train(algo_name, steps):
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # SB3's advice on CPU; more threads spin between the tiny MLP calls
    try:
        if algo_name == "ppo":
            from stable_baselines3 import PPO

            venv = quantgate_env.sb3.make_vec_env(N, **dict(DRIFT, oob_mode="terminate"))
            model = PPO("MlpPolicy", venv, n_steps=128, batch_size=96, n_epochs=2, seed=0, device="cpu")
        else:
            from sb3_contrib import TRPO

            venv = quantgate_env.sb3.make_vec_env(N, **dict(DRIFT, oob_mode="terminate"))
            model = TRPO("MlpPolicy", venv, n_steps=128, batch_size=128, seed=0, device="cpu")
        before = [p.detach().clone() for p in model.policy.parameters()]
        model.learn(total_timesteps=steps)
    finally:
        torch.set_num_threads(threads)
    return model, before


@pytest.mark.parametrize("algo_name", ["ppo", "trpo"])
def test_sb3_ppo_and_trpo_train_on_it(algo_name):
    """A few thousand steps: SB3 consumed them, logged episodes, and moved the policy to finite parameters."""
    model, before = _train(algo_name, steps=3 * 128 * 6)
    assert model.num_timesteps == 3 * 128 * 6
    after = list(model.policy.parameters())
    assert all(bool(p.isfinite().all()) for p in after)
    assert any(not bool((a == b).all()) for a, b in zip(after, before))
    episodes = list(model.ep_info_buffer)
    # episodes of 10 steps at most were counted (SB3 keeps the last 100)
    assert len(episodes) >= min(model._stats_window_size, 3 * 128 * 6 // 10 - N)
    assert all(1 <= ep["l"] <= 10 and np.isfinite(ep["r"]) for ep in episodes)
    action, _ = model.predict(model.env.reset(), deterministic=True)
    assert action.shape == (N, 3)


def test_gymnasium_vector_env_points_same_step_autoreset_to_the_sb3_vec_env():
    """The Gymnasium vector env refuses SAME_STEP with a message naming the SB3 vector env."""
    with pytest.raises(ValueError, match=r"autoreset_mode: .*NEXT_STEP.*SameStep.*quantgate_env\.sb3\.make_vec_env"):
        GateVectorEnv(num_envs=2, autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP, **SHORT)
    with pytest.raises(ValueError, match="autoreset_mode"):
        gymnasium.make_vec("quantgate_env:ZCQPEE-v0", num_envs=2, vectorization_mode="vector_entry_point",
                           autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP, **SHORT)
    assert GateVectorEnv(num_envs=2, autoreset_mode="NextStep", **SHORT).num_envs == 2


@pytest.fixture
def no_compiling(monkeypatch):
    """Fails the test if the compiled step would be built (bad input must be refused before)."""
    def refuse(*args):
        raise AssertionError("the compiled step was built for bad input")

    monkeypatch.setattr(sb3_adapter, "_compiled_same_step", refuse)


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_envs=0), r"n_envs: expected a positive integer, got 0"),
    (dict(n_envs=True), r"n_envs: expected a positive integer, got True"),
    (dict(n_envs="4"), r"n_envs: expected a positive integer, got '4'"),
    (dict(n_envs=2, seed=-1), r"seed: expected None or a non-negative integer .*got -1"),
    (dict(n_envs=2, seed=1.5), r"seed: .*got 1\.5"),
    (dict(n_envs=2, monitor="yes"), r"monitor: expected True or False, got 'yes'"),
    (dict(n_envs=2, render_mode=3), r"render_mode: expected None or a string, got 3"),
    (dict(n_envs=2, oob_mode="wrap"), r"oob_mode"),
    (dict(n_envs=2, bogus=1), r"bogus"),
])
def test_bad_arguments_are_refused_before_anything_compiles(kwargs, match, no_compiling):
    """Each bad argument: a ValueError naming it, what was expected and what arrived."""
    with pytest.raises(ValueError, match=match):
        quantgate_env.sb3.make_vec_env(**kwargs)


def test_bad_actions_options_and_calls_are_refused():
    """Bad actions and reset options name the argument; calls with no per-env meaning are refused."""
    venv = quantgate_env.sb3.make_vec_env(N, seed=0, monitor=False, **dict(DRIFT, oob_mode="terminate"))
    with pytest.raises(RuntimeError, match=r"before reset\(\)"):
        venv.step(np.zeros((N, 3)))
    venv.reset()
    nan = np.zeros((N, 3))
    nan[1, 2] = np.nan
    for bad, match in [(np.zeros((N - 1, 3)), r"actions: expected shape \(3, 3\), got \(2, 3\)"),
                       (nan, "actions: expected finite values"),
                       (np.full((N, 3), "up"), "actions: expected an array of real numbers")]:
        with pytest.raises(ValueError, match=match):
            venv.step(bad)
    venv.set_options({"bogus": 1})
    with pytest.raises(ValueError, match=r"options: expected None or a dict with no keys.*\['bogus'\]"):
        venv.reset()
    with pytest.raises(ValueError, match=r"set_attr: 'core' cannot be set"):
        venv.set_attr("core", None)
    with pytest.raises(ValueError, match=r"env_method: 'render' cannot be called"):
        venv.env_method("render")
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        venv.get_attr("nonexistent")


def test_without_sb3_the_error_says_what_to_install(monkeypatch):
    """The class is built from SB3's VecEnv on first use; without SB3 that use names the package."""
    monkeypatch.setitem(sys.modules, "stable_baselines3", None)
    monkeypatch.setitem(sys.modules, "stable_baselines3.common.vec_env", None)
    with pytest.raises(ImportError, match=r"quantgate_env\.sb3 needs Stable-Baselines3.*pip install stable-baselines3"):
        sb3_adapter.vec_env_class.__wrapped__()  # the uncached builder: the cached class stays as it is
