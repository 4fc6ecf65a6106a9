"""Deterministic evaluation, evals.npz, the pulse CSV and the command line."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import sb3_toy_env
from sb3_craft import FIXTURES

import sb3_bridge
from sb3_bridge import evaluation
from sb3_bridge.cli import main


@pytest.fixture(scope="module")
def box_policy():
    return sb3_bridge.load(FIXTURES / "ppo_box.zip")


def test_functional_env_episode_follows_the_policy(box_policy):
    (ep,) = sb3_bridge.evaluate(box_policy, "sb3_toy_env:make", env_options={"max_episode_steps": 7})
    assert ep["alive"].shape == (7,) and ep["alive"].all()
    assert ep["amps"].shape == (7, sb3_toy_env.K)
    # Replay in numpy: the actions recorded are the policy's means on the observations it saw.
    env = sb3_toy_env.make(max_episode_steps=7)
    obs, state = env.reset(None, env.eval_params)
    for k in range(7):
        action = box_policy.act(np.asarray(obs))
        np.testing.assert_allclose(ep["action"][k], action, atol=1e-6)
        obs, state, *_ = env.step(None, state, action, env.eval_params)
    np.testing.assert_allclose(ep["t"], np.arange(1, 8) * sb3_toy_env.K * sb3_toy_env.DT)


def test_functional_evaluation_leaves_x64_off(box_policy):
    import jax
    sb3_bridge.evaluate(box_policy, sb3_toy_env.make())
    assert not jax.config.jax_enable_x64


def test_gymnasium_episode_clips_like_sb3(box_policy):
    (ep,) = sb3_bridge.evaluate(box_policy, "Pendulum-v1", seed=3)
    assert ep["reward"].shape == (200,) and ep["alive"].all()
    assert np.all(np.abs(ep["action"]) <= 2.0)


def test_gymnasium_matches_sb3_own_episode():
    pytest.importorskip("torch")
    sb3 = pytest.importorskip("stable_baselines3")
    import gymnasium as gym
    model = sb3.PPO.load(FIXTURES / "ppo_box.zip", device="cpu")
    env = gym.make("Pendulum-v1")
    obs, _ = env.reset(seed=5)
    ref = []
    done = False
    while not done:
        action, _ = model.predict(obs, deterministic=True)
        obs, reward, term, trunc, _ = env.step(action)
        ref.append(reward)
        done = term or trunc
    (ep,) = sb3_bridge.evaluate(sb3_bridge.load(FIXTURES / "ppo_box.zip"), "Pendulum-v1", seed=5)
    np.testing.assert_allclose(ep["reward"], ref, atol=1e-5)


def test_summary_is_the_trainers(box_policy):
    (ep,) = sb3_bridge.evaluate(box_policy, sb3_toy_env.make())
    summary = evaluation.summarize(ep, evaluation.describe_evaluation(sb3_toy_env.make()))
    for key in ("eval_return", "eval_len", "eval_JT_min", "eval_t_JT_min", "eval_1mU_at_best",
                "eval_t_first_PE"):
        assert key in summary
    best = int(np.argmin(ep["JT"]))
    assert summary["eval_JT_min"] == pytest.approx(float(ep["JT"][best]))
    assert summary["eval_t_JT_min"] == pytest.approx(float(ep["t"][best]))


def test_pulse_csv_in_the_paper_format(tmp_path):
    amps = np.array([-3.4085512161254883, 0.4699885845184326, -1.2891948223114014])
    evaluation.write_pulse_csv(tmp_path / "p.csv", amps, 0.05)
    text = (tmp_path / "p.csv").read_text().splitlines()
    # The first rows of shared/data/paper-pulses/RL_pulse.csv, byte for byte.
    assert text == [",amplist,tlist", "0,0.0,0.0", "1,-3.4085512161254883,0.05", "2,0.4699885845184326,0.1",
                    "3,-1.2891948223114014,0.15000000000000002"]


def test_episode_pulse_flattens_alive_steps():
    ep = {"amps": np.arange(12.0).reshape(4, 3), "alive": np.array([True, True, True, False]),
          "t": np.array([0.15, 0.3, 0.45, 0.45])}
    amps, dt = evaluation.episode_pulse(ep)
    np.testing.assert_array_equal(amps, np.arange(9.0))
    assert dt == 0.05


def test_evals_npz_pads_unequal_episodes(tmp_path):
    eps = [{"reward": np.ones(3), "alive": np.ones(3, bool), "action": np.zeros((3, 1))},
           {"reward": np.ones(5), "alive": np.ones(5, bool), "action": np.zeros((5, 1))}]
    evaluation.write_evals(tmp_path / "evals.npz", eps, step=42)
    with np.load(tmp_path / "evals.npz") as z:
        assert z["step"].tolist() == [42, 42]
        assert z["reward"].shape == (2, 5) and z["action"].shape == (2, 5, 1)
        assert z["alive"].sum(axis=1).tolist() == [3, 5]


def test_resolve_env_errors():
    with pytest.raises(ValueError, match="cannot import module 'no_such_module_xyz'"):
        evaluation.resolve_env("no_such_module_xyz:make")
    with pytest.raises(ValueError, match="has no callable 'nope'"):
        evaluation.resolve_env("sb3_toy_env:nope")
    with pytest.raises(ValueError, match="neither 'module:factory' nor a registered Gymnasium id"):
        evaluation.resolve_env("NoSuchEnv-v9")
    with pytest.raises(ValueError, match="episodes"):
        sb3_bridge.evaluate(None, sb3_toy_env.make(), episodes=0)


# ------------------------------------------------------------------------------------------ CLI
def test_cli_evaluate_writes_outputs(tmp_path, capsys):
    rc = main(["evaluate", str(FIXTURES / "trpo_box.zip"), "--env", "sb3_toy_env:make",
               "--env-option", "max_episode_steps=5", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "minJT=" in out and "firstPE=" in out and "1-U=" in out
    with np.load(tmp_path / "evals.npz") as z:
        assert z["JT"].shape == (1, 5) and z["amps"].shape == (1, 5, 3) and z["step"][0] == 512
    rows = list(csv.reader((tmp_path / "pulse.csv").open()))
    assert rows[0] == ["", "amplist", "tlist"] and rows[1] == ["0", "0.0", "0.0"] and len(rows) == 2 + 15
    assert float(rows[-1][2]) == pytest.approx(15 * 0.05)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["episodes"][0]["eval_len"] == 5


def test_cli_summary_json_is_strict_json_with_null_for_nan(tmp_path):
    # Issue 37 row 1: an episode that never reaches a perfect entangler has eval_t_first_PE = NaN,
    # which was written as a bare NaN (JavaScript's JSON.parse rejects it); it is null now.
    assert main(["evaluate", str(FIXTURES / "trpo_box.zip"), "--env", "sb3_toy_env:make",
                 "--env-option", "max_episode_steps=5", "--out", str(tmp_path)]) == 0

    def refuse(name):
        raise AssertionError(f"summary.json is not strict JSON: bare {name}")
    summary = json.loads((tmp_path / "summary.json").read_text(), parse_constant=refuse)
    assert summary["episodes"][0]["eval_t_first_PE"] is None


def test_cli_evaluate_several_gymnasium_episodes(capsys):
    assert main(["evaluate", str(FIXTURES / "ppo_discrete.zip"), "--env", "CartPole-v1",
                 "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("R=") == 2 and "mean" in out


def test_cli_inspect(capsys):
    assert main(["inspect", str(FIXTURES / "a2c_box.zip")]) == 0
    assert "A2C" in capsys.readouterr().out
    assert main(["inspect", "--json", str(FIXTURES / "ppo_discrete.zip")]) == 0
    assert json.loads(capsys.readouterr().out)["supported"] is True


def test_cli_reports_bad_checkpoints(tmp_path, capsys):
    bad = tmp_path / "bad.zip"
    bad.write_text("nope")
    assert main(["evaluate", str(bad), "--env", "CartPole-v1"]) == 2
    assert "not a zip file" in capsys.readouterr().err


def test_policy_and_env_mismatch_is_reported_before_running(box_policy):
    with pytest.raises(ValueError, match=r"CartPole-v1 observes shape \(4,\), but the policy takes 3 inputs"):
        sb3_bridge.evaluate(box_policy, "CartPole-v1")
    import gymnasium as gym

    class ThreeObsDiscrete(gym.Env):
        observation_space = gym.spaces.Box(-1, 1, (3,))
        action_space = gym.spaces.Discrete(2)

    with pytest.raises(ValueError, match=r"action space Discrete\(2\), but the policy outputs gaussian"):
        sb3_bridge.evaluate(box_policy, ThreeObsDiscrete())


def test_cli_inspect_exit_code_for_unsupported(tmp_path, capsys):
    from sb3_craft import read_data, rewrite_checkpoint
    data = read_data(FIXTURES / "ppo_box.zip")
    data["use_sde"] = True
    rewrite_checkpoint(FIXTURES / "ppo_box.zip", tmp_path / "sde.zip", data=data)
    assert main(["inspect", str(tmp_path / "sde.zip")]) == 3
    assert "NOT LOADABLE" in capsys.readouterr().out
    assert main(["evaluate", str(tmp_path / "sde.zip"), "--env", "Pendulum-v1"]) == 2
    assert "gSDE" in capsys.readouterr().err
