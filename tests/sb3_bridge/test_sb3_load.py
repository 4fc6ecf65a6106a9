"""Loading the committed SB3 checkpoints: JAX outputs equal SB3's own (recorded in expected.npz).

expected.npz was computed by torch on the machine that recorded it, and the policies run here in
XLA: both are float32 evaluations of the same weights, so they are compared within the bound that
float32 rounding gives each of them around the exact outputs (``float32_bound``: derived per output
from the weights, not measured on one machine); arg-max actions exactly, where that bound decides
them.
"""

from __future__ import annotations

import numpy as np
import pytest
import sb3_bridge
from float32_bound import assert_within, decided_argmax, policy_outputs
from sb3_craft import CHECKPOINTS, FIXTURES


@pytest.fixture(scope="module")
def policies(request):
    return {name: sb3_bridge.load(FIXTURES / f"{name}.zip") for name in CHECKPOINTS}


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_deterministic_actions_match_sb3_predict(policies, expected, name):
    """Actions (and probabilities) of JAX and of SB3's recording, each within its rounding bound."""
    policy = policies[name]
    obs = expected[f"{name}/obs"]
    assert obs.shape == (256, policy.model.obs_dim)
    actions = policy.act(obs, deterministic=True)
    exact = policy_outputs(policy, obs)
    if policy.model.is_discrete:
        top, decided = decided_argmax(*exact["logits"])
        assert decided.all(), f"{int((~decided).sum())} observations are near-ties of the logits"
        np.testing.assert_array_equal(actions, top)
        np.testing.assert_array_equal(expected[f"{name}/predict"], top)
        p, bound = exact["probs"]
        # each side within its own bound of the exact probabilities, so within 2 bounds of each other
        assert_within(policy.action_probs(obs), p, bound, f"{name} probs (JAX)", n_evaluations=1)
        assert_within(expected[f"{name}/probs"], p, bound, f"{name} probs (SB3)", n_evaluations=1)
    else:
        # The policy returns the unclipped Gaussian mean (the environment clips); SB3's predict
        # clips to the action space, its distribution mode does not.
        mean, bound = exact["mode"]
        assert_within(actions, mean, bound, f"{name} mode (JAX)", n_evaluations=1)
        assert_within(expected[f"{name}/mode"], mean, bound, f"{name} mode (SB3)", n_evaluations=1)
        low, high = policy.metadata["action_space"]["low"], policy.metadata["action_space"]["high"]
        clipped = np.clip(actions, float(low.strip("[]")), float(high.strip("[]")))
        assert_within(clipped, expected[f"{name}/predict"], bound, f"{name} predict")  # clip: 1-Lipschitz


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_values_match_sb3(policies, expected, name):
    """JAX's and SB3's values, each within its float32 rounding bound of the exact values."""
    obs = expected[f"{name}/obs"]
    values, bound = policy_outputs(policies[name], obs)["values"]
    assert_within(policies[name].value(obs), values, bound, f"{name} values (JAX)", n_evaluations=1)
    assert_within(expected[f"{name}/values"], values, bound, f"{name} values (SB3)", n_evaluations=1)


def test_single_observation_shape(policies, expected):
    obs = expected["ppo_box/obs"][0]
    assert policies["ppo_box"].act(obs).shape == (1,)
    assert policies["ppo_discrete"].act(expected["ppo_discrete/obs"][0]).shape == ()


def test_kernels_are_transposed_weights_bit_for_bit(policies):
    from sb3_bridge.archive import read_members
    from sb3_bridge.torch_archive import read_state_dict
    path = FIXTURES / "trpo_box.zip"
    state = read_state_dict(read_members(path, ("policy.pth",))["policy.pth"], path)
    params = policies["trpo_box"].params
    np.testing.assert_array_equal(np.asarray(params["actor"]["net"]["dense_0"]["kernel"]),
                                  state["mlp_extractor.policy_net.0.weight"].T)
    np.testing.assert_array_equal(np.asarray(params["actor"]["net"]["dense_2"]["kernel"]),
                                  state["action_net.weight"].T)
    np.testing.assert_array_equal(np.asarray(params["critic"]["net"]["dense_1"]["bias"]),
                                  state["mlp_extractor.value_net.2.bias"])
    np.testing.assert_array_equal(np.asarray(params["actor"]["log_std"]), state["log_std"])


def test_activation_read_from_data_or_sb3_default(policies):
    assert policies["trpo_box"].model.activation == "relu"
    assert policies["trpo_box"].metadata["activation_source"] == "data"
    assert policies["a2c_box"].model.activation == "gelu"
    assert policies["ppo_box"].model.activation == "tanh"
    assert policies["ppo_box"].metadata["activation_source"] == "default"


def test_wrong_activation_override_is_visible_in_the_actions(expected, fixtures_dir):
    # The reference's lesson: tanh instead of ReLU gives a different policy, and only a comparison
    # against SB3's outputs shows it.
    wrong = sb3_bridge.load(fixtures_dir / "trpo_box.zip", activation="tanh")
    assert wrong.metadata["activation_source"] == "argument"
    diff = np.abs(wrong.act(expected["trpo_box/obs"]) - expected["trpo_box/mode"]).max()
    assert diff > 1e-3


@pytest.mark.parametrize("spelling", ["relu", "ReLU", "torch.nn.ReLU"])
def test_activation_override_spellings(fixtures_dir, spelling):
    assert sb3_bridge.load(fixtures_dir / "trpo_box.zip", activation=spelling).model.activation == "relu"


def test_unknown_activation_override_is_rejected(fixtures_dir):
    with pytest.raises(ValueError, match="activation: expected one of .*got 'swish'"):
        sb3_bridge.load(fixtures_dir / "trpo_box.zip", activation="swish")


def test_metadata_records_the_source(policies, fixtures_dir):
    meta = policies["trpo_box"].metadata
    assert meta["source"] == "sb3" and meta["algorithm"] == "TRPO"
    assert meta["num_timesteps"] == 512
    assert meta["checkpoint"].endswith("trpo_box.zip")
    assert policies["ppo_discrete"].metadata["action_space"]["n"] == 2


def test_loaded_policy_round_trips_through_jaxrl_agents(policies, expected, tmp_path):
    from jaxrl_agents.common.policy import Policy
    policies["ppo_box"].save(tmp_path / "p")
    again = Policy.load(str(tmp_path / "p"))
    obs = expected["ppo_box/obs"]
    np.testing.assert_array_equal(again.act(obs), policies["ppo_box"].act(obs))
    assert again.metadata["source"] == "sb3"


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_inspect_describes_without_building(fixtures_dir, name):
    info = sb3_bridge.inspect(fixtures_dir / f"{name}.zip")
    assert info.supported, info.problems
    assert info.algorithm == {"ppo_box": "PPO", "ppo_discrete": "PPO", "a2c_box": "A2C", "trpo_box": "TRPO"}[name]
    assert info.policy_class == "ActorCriticPolicy"
    assert info.pi_hidden == info.vf_hidden
    assert "loadable" in info.summary()
    assert sum(int(np.prod(s)) for s in info.parameters.values()) == info.n_parameters


def test_inspect_reports_spaces(fixtures_dir):
    info = sb3_bridge.inspect(fixtures_dir / "ppo_discrete.zip")
    assert (info.observation_space.kind, info.observation_space.shape) == ("Box", (4,))
    assert (info.action_space.kind, info.action_space.n) == ("Discrete", 2)
    assert (info.obs_dim, info.act_dim, info.pi_hidden) == (4, 2, (16, 16))


def test_live_sb3_predict_on_fresh_observations(fixtures_dir):
    """Same check against SB3 itself on new random observations (skipped without SB3)."""
    pytest.importorskip("torch")
    sb3 = pytest.importorskip("stable_baselines3")
    contrib = pytest.importorskip("sb3_contrib")
    rng = np.random.default_rng(7)
    for name, cls in [("ppo_box", sb3.PPO), ("ppo_discrete", sb3.PPO), ("a2c_box", sb3.A2C),
                      ("trpo_box", contrib.TRPO)]:
        model = cls.load(fixtures_dir / f"{name}.zip", device="cpu")
        policy = sb3_bridge.load(fixtures_dir / f"{name}.zip")
        obs = rng.uniform(-1, 1, (256, policy.model.obs_dim)).astype(np.float32)
        ref, _ = model.predict(obs, deterministic=True)
        ours = policy.act(obs)
        exact = policy_outputs(policy, obs)
        if policy.model.is_discrete:
            top, decided = decided_argmax(*exact["logits"])
            assert decided.all(), f"{name}: {int((~decided).sum())} near-ties of the logits"
            np.testing.assert_array_equal(ours, ref, err_msg=name)
        else:
            ours = np.clip(ours, model.action_space.low, model.action_space.high)
            assert_within(ours, ref, exact["mode"][1], name)
