"""Separate critic widths (``critic_hidden``): the actor is untouched, the critic has its own tower.

Checked against the shared-width network built from the same key: the actor's parameters and
outputs are identical, the critic's layer shapes follow `critic_hidden`, and its values are the
hand-written MLP of its own parameters.
"""

import json

import jax
import numpy as np
import pytest

from jaxrl_agents import ActorCritic, Policy
from jaxrl_agents.common.networks.mlp import mlp_apply
from jaxrl_agents.run.algorithms import make_config
from jaxrl_agents.console.cli import build_parser


def test_the_critic_gets_its_own_widths_and_the_actor_is_unchanged(tmp_path):
    key = jax.random.PRNGKey(4)
    shared = ActorCritic(6, "gaussian", (2,), (32, 32), "tanh")
    split = ActorCritic(6, "gaussian", (2,), (32, 32), "tanh", critic_hidden=(8, 16, 4))
    p_shared, p_split = shared.init(key), split.init(key)
    for a, b in zip(jax.tree_util.tree_leaves(p_shared["actor"]), jax.tree_util.tree_leaves(p_split["actor"])):
        np.testing.assert_array_equal(a, b)
    kernels = [np.asarray(layer["kernel"]).shape for layer in p_split["critic"]["net"].values()]
    assert kernels == [(6, 8), (8, 16), (16, 4), (4, 1)]
    obs = np.random.default_rng(0).normal(size=(5, 6)).astype(np.float32)
    h = obs  # the critic by hand: tanh layers, a linear value head
    for i in range(4):
        layer = p_split["critic"]["net"][f"dense_{i}"]
        h = h @ np.asarray(layer["kernel"]) + np.asarray(layer["bias"])
        h = np.tanh(h) if i < 3 else h
    np.testing.assert_allclose(split.value(p_split["critic"], obs), h[:, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(split.value(p_split["critic"], obs),
                                  mlp_apply(p_split["critic"]["net"], obs, "tanh")[:, 0])
    # saved and loaded: the definition round-trips, as format version 2 (older readers refuse it)
    Policy(split, p_split).save(str(tmp_path / "p"))
    spec = json.load(open(tmp_path / "p" / "policy.json"))
    assert spec["network"]["critic_hidden"] == [8, 16, 4] and spec["format_version"] == 2
    assert Policy.load(str(tmp_path / "p")).model == split
    Policy(shared, p_shared).save(str(tmp_path / "q"))
    spec = json.load(open(tmp_path / "q" / "policy.json"))
    assert "critic_hidden" not in spec["network"] and spec["format_version"] == 1


def test_equal_widths_are_the_shared_network():
    assert ActorCritic(6, "gaussian", (2,), (32,), critic_hidden=(32,)) == ActorCritic(6, "gaussian", (2,), (32,))


@pytest.mark.parametrize("bad", [(), (0, 4), (-1,)])
def test_bad_widths_are_refused_by_name(bad):
    with pytest.raises(ValueError, match="critic_hidden: expected positive layer widths"):
        ActorCritic(6, "gaussian", (2,), (32,), critic_hidden=bad)


def test_config_and_cli(tmp_path):
    cfg = make_config("ppo", {"critic_hidden": [64, 64], "hidden": [16]})
    assert cfg.critic_hidden == (64, 64) and cfg.to_dict()["critic_hidden"] == [64, 64]
    # absent from config.json unless set: configs written before the field read the same
    assert "critic_hidden" not in make_config("ppo", {}).to_dict()
    assert make_config("ppo", make_config("ppo", {}).to_dict()) == make_config("ppo", {})
    args = build_parser("trpo").parse_args(["--critic-hidden", "256", "256", "--hidden", "64"])
    assert args.cfg_critic_hidden == [256, 256] and args.cfg_hidden == [64]
    with pytest.raises(ValueError, match="critic_hidden: expected a non-empty sequence"):
        make_config("ppo", {"critic_hidden": []})
