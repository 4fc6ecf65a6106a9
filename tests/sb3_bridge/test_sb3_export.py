"""export: jaxrl-agents policies as SB3 / sb3-contrib zips that load and predict the same actions."""

from __future__ import annotations

import numpy as np
import pytest
from sb3_craft import FIXTURES

import sb3_bridge

torch = pytest.importorskip("torch", reason="export needs torch (the 'export' extra)")
sb3 = pytest.importorskip("stable_baselines3")


def _obs(n, dim, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (n, dim)).astype(np.float32)


@pytest.mark.parametrize("name,algo", [("ppo_box", "ppo"), ("ppo_discrete", "ppo"), ("a2c_box", "a2c"),
                                       ("trpo_box", "trpo")])
def test_round_trip_through_sb3(tmp_path, name, algo):
    policy = sb3_bridge.load(FIXTURES / f"{name}.zip")
    path = sb3_bridge.export(policy, tmp_path / "out", algo=algo)
    assert path.endswith(".zip")
    if algo == "trpo":
        cls = pytest.importorskip("sb3_contrib").TRPO
    else:
        cls = getattr(sb3, algo.upper())
    model = cls.load(path, device="cpu")
    obs = _obs(256, policy.model.obs_dim)
    ref, _ = model.predict(obs, deterministic=True)
    ours = policy.act(obs)
    if not policy.model.is_discrete:
        assert model.action_space.high[0] == 2.0  # Pendulum's bounds, carried over from the import
        ours = np.clip(ours, model.action_space.low, model.action_space.high)
    np.testing.assert_allclose(ours, ref, atol=1e-5, rtol=0)
    # And back: the exported file imports to identical parameters.
    again = sb3_bridge.load(path)
    for role in ("actor", "critic"):
        for layer, values in policy.params[role]["net"].items():
            np.testing.assert_array_equal(np.asarray(again.params[role]["net"][layer]["kernel"]),
                                          np.asarray(values["kernel"]))
    assert again.model == policy.model


def test_fresh_jax_policy_with_paper_network(tmp_path):
    import jax
    from jaxrl_agents.common.networks import ActorCritic
    from jaxrl_agents.common.policy import Policy
    model = ActorCritic(28, "gaussian", (3,), (128, 128), "relu")
    policy = Policy(model, model.init(jax.random.PRNGKey(3)))
    contrib = pytest.importorskip("sb3_contrib")
    path = sb3_bridge.export(policy, tmp_path / "paper.zip", algo="trpo")
    loaded = contrib.TRPO.load(path, device="cpu")
    assert loaded.policy.mlp_extractor.policy_net[1].__class__.__name__ == "ReLU"
    obs = _obs(256, 28)
    # No recorded bounds: the exported action space is [-1, 1] (SB3 needs finite bounds).
    assert loaded.action_space.low.tolist() == [-1.0] * 3 and loaded.action_space.high.tolist() == [1.0] * 3
    np.testing.assert_allclose(loaded.predict(obs, deterministic=True)[0], np.clip(policy.act(obs), -1, 1),
                               atol=1e-5)
    np.testing.assert_allclose(loaded.policy.get_distribution(torch.as_tensor(obs)).mode().detach().numpy(),
                               policy.act(obs), atol=1e-5)
    values = loaded.policy.predict_values(torch.as_tensor(obs)).detach().numpy()[:, 0]
    np.testing.assert_allclose(values, policy.value(obs), atol=1e-5)


def test_explicit_action_space_is_used_and_checked(tmp_path):
    import gymnasium as gym
    policy = sb3_bridge.load(FIXTURES / "ppo_box.zip")
    path = sb3_bridge.export(policy, tmp_path / "a.zip",
                             action_space=gym.spaces.Box(-1.0, 1.0, (1,), np.float32))
    assert sb3.PPO.load(path, device="cpu").action_space.high[0] == 1.0
    with pytest.raises(ValueError, match="action_space: expected a Box with 1 elements"):
        sb3_bridge.export(policy, tmp_path / "b.zip", action_space=gym.spaces.Box(-1, 1, (2,)))
    with pytest.raises(ValueError, match="algo: expected one of"):
        sb3_bridge.export(policy, tmp_path / "c.zip", algo="sac")


def test_cli_export(tmp_path, capsys):
    from sb3_bridge.cli import main
    policy = sb3_bridge.load(FIXTURES / "ppo_discrete.zip")
    policy.save(str(tmp_path / "pol"))
    assert main(["export", str(tmp_path / "pol"), str(tmp_path / "x.zip")]) == 0
    assert "stable_baselines3.PPO.load" in capsys.readouterr().out
    model = sb3.PPO.load(tmp_path / "x.zip", device="cpu")
    obs = _obs(64, 4)
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], policy.act(obs))
