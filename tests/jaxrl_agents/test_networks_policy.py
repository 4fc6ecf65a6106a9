"""Network initialisation, precision, and the Policy object (act / value / save / load)."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnasium import spaces

import jaxrl_agents
from jaxrl_agents import ActorCritic, Policy, load_policy
from jaxrl_agents.common.networks.mlp import mlp_apply


def test_import_leaves_global_precision_alone():
    assert jax.config.jax_enable_x64 is False
    assert jnp.zeros(1).dtype == jnp.float32


def test_init_layout_gains_and_float32_under_x64(x64):
    model = ActorCritic.from_spaces(spaces.Box(-1, 1, (6,)), spaces.Box(-1, 1, (3,)),
                                    hidden=(32, 16), activation="relu")
    params = model.init(jax.random.PRNGKey(0))
    leaves = jax.tree_util.tree_leaves(params)
    assert all(x.dtype == jnp.float32 for x in leaves)
    actor, critic = params["actor"]["net"], params["critic"]["net"]
    assert actor["dense_0"]["kernel"].shape == (6, 32)
    assert actor["dense_2"]["kernel"].shape == (16, 3)
    assert critic["dense_2"]["kernel"].shape == (16, 1)
    np.testing.assert_array_equal(params["actor"]["log_std"], np.zeros(3, np.float32))
    # Orthogonal init: the singular values of a kernel all equal its gain.
    for net, head_gain in ((actor, 0.01), (critic, 1.0)):
        for name, gain in (("dense_0", math.sqrt(2)), ("dense_1", math.sqrt(2)), ("dense_2", head_gain)):
            sv = np.linalg.svd(np.asarray(net[name]["kernel"]), compute_uv=False)
            np.testing.assert_allclose(sv, gain, rtol=1e-5)
            assert not np.any(np.asarray(net[name]["bias"]))
    # float64 observations go through a float32 network.
    value = model.value(params["critic"], jnp.ones((4, 6), jnp.float64))
    assert value.shape == (4,) and value.dtype == jnp.float32


@pytest.mark.parametrize("activation", ["relu", "tanh", "leaky_relu", "gelu"])
def test_activations_are_the_named_functions(activation):
    model = ActorCritic(1, "gaussian", (1,), hidden=(1,), activation=activation)
    net = {"dense_0": {"kernel": jnp.ones((1, 1)), "bias": jnp.zeros(1)},
           "dense_1": {"kernel": jnp.ones((1, 1)), "bias": jnp.zeros(1)}}
    x = jnp.array([[-2.0], [0.5]])
    out = np.asarray(mlp_apply(net, x, activation))[:, 0]
    ref = {"relu": [0.0, 0.5], "tanh": np.tanh([-2.0, 0.5]), "leaky_relu": [-0.02, 0.5],
           "gelu": [-2.0 * 0.5 * (1 + math.erf(-2 / math.sqrt(2))),
                    0.5 * 0.5 * (1 + math.erf(0.5 / math.sqrt(2)))]}[activation]
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-7)
    assert model.activation == activation


def test_network_definition_validates():
    with pytest.raises(ValueError, match="activation"):
        ActorCritic(3, "gaussian", (2,), activation="swish")
    with pytest.raises(ValueError, match="hidden"):
        ActorCritic(3, "gaussian", (2,), hidden=(0,))
    with pytest.raises(ValueError, match="action_space"):
        ActorCritic.from_spaces(spaces.Box(-1, 1, (3,)), spaces.Text(5))


def test_gaussian_policy_act_value_save_load(tmp_path):
    model = ActorCritic(5, "gaussian", (2,), hidden=(8, 8))
    params = model.init(jax.random.PRNGKey(3))
    params["actor"]["log_std"] = jnp.array([-1.0, 0.5])
    pol = Policy(model, params, {"algo": "ppo", "step": np.int64(7)})
    obs = np.linspace(-1, 1, 5)
    a = pol.act(obs)
    assert a.shape == (2,) and a.dtype == np.float32
    batch = np.stack([obs, -obs])
    np.testing.assert_allclose(pol.act(batch)[0], a, rtol=1e-6)
    assert pol.value(batch).shape == (2,)
    with pytest.raises(ValueError, match="key"):
        pol.act(obs, deterministic=False)
    s1 = pol.act(obs, key=jax.random.PRNGKey(0), deterministic=False)
    assert not np.allclose(s1, a)
    with pytest.raises(ValueError, match="discrete"):
        pol.action_probs(obs)
    with pytest.raises(ValueError, match="obs_dim=5"):
        pol.act(np.ones(4))

    pol.save(tmp_path / "p")
    spec = json.loads((tmp_path / "p" / "policy.json").read_text())
    assert spec["network"]["hidden"] == [8, 8] and spec["metadata"]["step"] == 7
    with np.load(tmp_path / "p" / "params.npz", allow_pickle=False) as z:
        assert "actor/net/dense_0/kernel" in z.files and z["actor/log_std"].dtype == np.float32
    back = load_policy(str(tmp_path / "p"))
    np.testing.assert_array_equal(back.act(batch), pol.act(batch))
    np.testing.assert_array_equal(back.value(batch), pol.value(batch))
    np.testing.assert_array_equal(back.act(obs, key=jax.random.PRNGKey(0), deterministic=False), s1)


def test_discrete_policy_probs_and_masks(tmp_path):
    model = ActorCritic(3, "categorical", (4,), hidden=(8,))
    pol = Policy(model, model.init(jax.random.PRNGKey(0)))
    obs = {"observation": np.ones(3), "action_mask": np.array([0, 0, 1, 0], bool)}
    assert int(pol.act(obs)) == 2
    probs = pol.action_probs(np.ones((2, 3)))
    assert probs.shape == (2, 4)
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-6)
    pol.save(tmp_path)
    assert int(Policy.load(str(tmp_path)).act(obs)) == 2


def test_policy_rejects_wrong_params_and_files(tmp_path):
    model = ActorCritic(5, "gaussian", (2,), hidden=(8,))
    params = model.init(jax.random.PRNGKey(0))
    params["actor"]["net"]["dense_0"]["kernel"] = jnp.zeros((4, 8))
    with pytest.raises(ValueError, match="dense_0/kernel: expected shape"):
        Policy(model, params)
    with pytest.raises(FileNotFoundError, match="policy.json"):
        Policy.load(str(tmp_path))
    (tmp_path / "policy.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ValueError, match="format"):
        Policy.load(str(tmp_path))


def test_default_towers_are_flax_modules_initialised_as_before_flax():
    """The default actor/critic are linen `MLP`s; `init` keeps the pre-Flax key schedule (split
    into actor/critic, then one key per layer, host QR), so a seed gives the same parameters as
    before, and the modules compute x @ kernel + bias with the named activation."""
    import flax.linen as nn

    from jaxrl_agents.common.networks.mlp import MLP, orthogonal

    model = ActorCritic(6, "gaussian", (3,), hidden=(32, 16), activation="relu")
    assert isinstance(model.actor, MLP) and isinstance(model.critic, nn.Module)
    key = jax.random.PRNGKey(7)
    params = model.init(key)
    k_actor, k_critic = jax.random.split(key)
    for net, k, n_out, head_gain in ((params["actor"]["net"], k_actor, 3, 0.01),
                                     (params["critic"]["net"], k_critic, 1, 1.0)):
        sizes, keys = (6, 32, 16, n_out), jax.random.split(k, 3)
        for i in range(3):
            gain = head_gain if i == 2 else math.sqrt(2)
            np.testing.assert_array_equal(net[f"dense_{i}"]["kernel"],
                                          orthogonal(keys[i], (sizes[i], sizes[i + 1]), gain))
    # Forward pass == a numpy reference of the same parameters (float64 reference).
    x = np.random.default_rng(0).normal(size=(4, 6))
    ref = x
    for i in range(3):
        layer = params["critic"]["net"][f"dense_{i}"]
        ref = ref @ np.asarray(layer["kernel"], np.float64) + np.asarray(layer["bias"], np.float64)
        ref = np.maximum(ref, 0) if i < 2 else ref
    np.testing.assert_allclose(model.value(params["critic"], x), ref[:, 0], rtol=1e-5, atol=1e-6)
    # The module's own (flax) initialisers give the same layout, gains and zero biases.
    own = model.actor.init(jax.random.PRNGKey(0), jnp.zeros((1, 6)))["params"]
    assert jax.tree_util.tree_map(np.shape, own) == jax.tree_util.tree_map(
        np.shape, params["actor"]["net"])
    np.testing.assert_allclose(np.linalg.svd(np.asarray(own["dense_2"]["kernel"]),
                                             compute_uv=False), 0.01, rtol=1e-5)
    assert model.param_shapes()["actor"]["net"]["dense_1"]["kernel"] == (32, 16)


def test_policy_directories_written_before_flax_still_load(tmp_path):
    """A policy.json of format 1 (written before the towers were Flax modules) loads, and the
    default network still writes exactly that format."""
    model = ActorCritic(3, "categorical", (4,), hidden=(8,), activation="gelu")
    params = model.init(jax.random.PRNGKey(1))
    flat = {"actor/net/dense_0/kernel": params["actor"]["net"]["dense_0"]["kernel"],
            "actor/net/dense_0/bias": params["actor"]["net"]["dense_0"]["bias"],
            "actor/net/dense_1/kernel": params["actor"]["net"]["dense_1"]["kernel"],
            "actor/net/dense_1/bias": params["actor"]["net"]["dense_1"]["bias"],
            "critic/net/dense_0/kernel": params["critic"]["net"]["dense_0"]["kernel"],
            "critic/net/dense_0/bias": params["critic"]["net"]["dense_0"]["bias"],
            "critic/net/dense_1/kernel": params["critic"]["net"]["dense_1"]["kernel"],
            "critic/net/dense_1/bias": params["critic"]["net"]["dense_1"]["bias"]}
    old = tmp_path / "old"
    old.mkdir()
    np.savez(old / "params.npz", **{k: np.asarray(v) for k, v in flat.items()})
    (old / "policy.json").write_text(json.dumps({
        "format": "jaxrl_agents.Policy", "format_version": 1,
        "network": {"obs_dim": 3, "action_kind": "categorical", "action_shape": [4],
                    "hidden": [8], "activation": "gelu"}, "metadata": {"algo": "trpo"}}))
    back = load_policy(str(old))
    assert back.model == model and back.metadata == {"algo": "trpo"}
    obs = np.random.default_rng(2).normal(size=(6, 3))
    np.testing.assert_array_equal(back.action_probs(obs), Policy(model, params).action_probs(obs))

    Policy(model, params).save(str(tmp_path / "new"))
    spec = json.loads((tmp_path / "new" / "policy.json").read_text())
    assert spec["format_version"] == 1
    assert spec["network"] == json.loads((old / "policy.json").read_text())["network"]
    spec["format_version"] = 3
    (tmp_path / "new" / "policy.json").write_text(json.dumps(spec))
    with pytest.raises(ValueError, match="format_version 3 is newer"):
        Policy.load(str(tmp_path / "new"))


def test_mlp_pieces_are_still_importable_from_networks():
    """The MLP pieces live in common/networks/mlp.py; the networks package re-exports them, so
    ``from jaxrl_agents.common.networks import MLP`` works as it always did."""
    from jaxrl_agents.common import networks
    from jaxrl_agents.common.networks import mlp

    for name in ("ACTIVATIONS", "HIDDEN_GAIN", "POLICY_HEAD_GAIN", "VALUE_HEAD_GAIN", "MLP",
                 "mlp_init", "mlp_apply", "orthogonal"):
        assert getattr(networks, name) is getattr(mlp, name), name
    assert set(mlp.__all__) <= set(networks.__all__)
