"""SB3 checkpoints whose actor and critic have different widths (``net_arch=dict(pi=..., vf=...)``).

Real SB3 / sb3-contrib models are built with separate towers, saved, imported and compared with SB3's
own ``predict`` and ``predict_values`` on fresh observations; then exported back and reloaded by SB3.
The tolerance is float32 rounding through a few layers (both sides compute in float32, in different
summation orders): about width x eps32 x |activations| ~ 32 x 6e-8 x O(10) < 1e-5.
"""

from __future__ import annotations

import numpy as np
import pytest

import sb3_bridge

torch = pytest.importorskip("torch")
sb3 = pytest.importorskip("stable_baselines3")
contrib = pytest.importorskip("sb3_contrib")

ATOL = 1e-5
PI, VF = [32, 16], [8, 24, 8]
CASES = [("ppo", "Pendulum-v1"), ("ppo", "CartPole-v1"), ("a2c", "Pendulum-v1"), ("trpo", "Pendulum-v1")]


def _cls(algo):
    return contrib.TRPO if algo == "trpo" else getattr(sb3, algo.upper())


def _obs(model, n=256, seed=5):
    space = model.observation_space
    return np.random.default_rng(seed).uniform(-1, 1, (n, *space.shape)).astype(np.float32)


def _compare(model, policy):
    obs = _obs(model)
    ref, _ = model.predict(obs, deterministic=True)
    ours = policy.act(obs)
    if not policy.model.is_discrete:
        ours = np.clip(ours, model.action_space.low, model.action_space.high)
    np.testing.assert_allclose(ours, ref, atol=ATOL, rtol=0)
    values = model.policy.predict_values(torch.as_tensor(obs)).detach().numpy()[:, 0]
    np.testing.assert_allclose(policy.value(obs), values, atol=ATOL, rtol=0)


@pytest.mark.parametrize("algo,env_id", CASES)
def test_separate_widths_import_and_match_sb3(tmp_path, algo, env_id):
    model = _cls(algo)("MlpPolicy", env_id, policy_kwargs=dict(net_arch=dict(pi=PI, vf=VF)),
                       device="cpu", seed=3)
    model.save(tmp_path / "m.zip")
    policy = sb3_bridge.load(tmp_path / "m.zip")
    assert policy.model.hidden == tuple(PI) and policy.model.critic_hidden == tuple(VF)
    _compare(model, policy)
    # and back to SB3: the exported zip declares the same towers and predicts the same
    path = sb3_bridge.export(policy, tmp_path / "out", algo=algo)
    again = _cls(algo).load(path, device="cpu")
    assert again.policy.net_arch == dict(pi=PI, vf=VF)
    _compare(again, policy)


def test_equal_widths_stay_the_shared_width_network(tmp_path):
    model = sb3.PPO("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(net_arch=dict(pi=[16], vf=[16])),
                    device="cpu", seed=1)
    model.save(tmp_path / "m.zip")
    policy = sb3_bridge.load(tmp_path / "m.zip")
    assert policy.model.critic_hidden is None and "critic_hidden" not in policy.model.to_dict()
