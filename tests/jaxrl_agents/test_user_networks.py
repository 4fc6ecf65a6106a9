"""User networks (Flax linen modules from ``module:factory``): train, save, load, evaluate, resume,
and bad networks refused with a clear error before anything compiles."""

import json
import os

import jax
import numpy as np
import pytest

from jaxrl_agents import ActorCritic, Policy, load_policy
from jaxrl_agents.console import cli
from jaxrl_agents.run import loop, trainer

from .conftest import PPO_CFG, TOY_ENV, TRPO_CFG
from .user_networks import SPEC, residual_layernorm

# One config for every training run here (the compilation cache then serves them all).
CFG = dict(PPO_CFG, total_steps=512 * 6)
OPTIONS = {"width": 16}


def _train(out, **kw):
    args = dict(algo="ppo", env=TOY_ENV, config=CFG, seeds=(1,), eval_every=2 * 512,
                out=str(out), checkpoint_every=2, progress="off", network=SPEC,
                network_options=OPTIONS)
    args.update(kw)
    return trainer.train(**args)


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def test_user_network_trains_saves_loads_and_resumes(tmp_path):
    full = _train(tmp_path / "full")
    run_dir = full.run_dirs[0]
    # The residual/LayerNorm towers are what trained: their parameters are in the policy file.
    with open(os.path.join(run_dir, "last_policy", "policy.json")) as f:
        spec = json.load(f)
    assert spec["format_version"] == 2
    assert spec["network"]["network"] == SPEC and spec["network"]["network_options"] == OPTIONS
    npz = np.load(os.path.join(run_dir, "last_policy", "params.npz"), allow_pickle=False)
    assert "actor/net/LayerNorm_0/scale" in npz and "critic/net/Dense_3/kernel" in npz
    with open(os.path.join(run_dir, "config.json")) as f:
        assert json.load(f)["algo_config"]["network"] == SPEC

    # save -> load -> identical actions and values (the module is rebuilt from its name).
    loaded = load_policy(run_dir, "last")
    assert loaded.model == ActorCritic(5, "gaussian", (2,), network=SPEC, network_options=OPTIONS)
    obs = np.random.default_rng(0).normal(size=(7, 5)).astype(np.float32)
    reloaded = Policy.load(os.path.join(run_dir, "last_policy"))
    np.testing.assert_array_equal(loaded.act(obs), reloaded.act(obs))
    key = jax.random.PRNGKey(3)
    np.testing.assert_array_equal(loaded.act(obs, key, deterministic=False),
                                  reloaded.act(obs, key, deterministic=False))
    np.testing.assert_array_equal(loaded.value(obs), reloaded.value(obs))
    # The final evaluation's policy is the final train state's actor.
    for a, b in zip(_leaves(full.state.params["actor"]), _leaves(loaded.params["actor"])):
        np.testing.assert_array_equal(a[0], b)

    # Interrupted after 3 updates (checkpoint at 2), resumed: the same run as uninterrupted.
    part = _train(tmp_path / "part", stop_after=3)
    assert not part.finished
    resumed = trainer.resume(part.run_dirs[0], progress="off")
    assert resumed.finished
    for a, b in zip(_leaves(full.state), _leaves(resumed.state)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(load_policy(resumed.run_dirs[0], "last").act(obs),
                                  loaded.act(obs))


def test_trpo_trains_a_user_network(tmp_path):
    """TRPO's trust-region step (Fisher products through model.dist) runs on a user actor."""
    res = _train(tmp_path, algo="trpo", config=dict(TRPO_CFG, total_steps=512 * 2))
    assert res.finished and len(res.rows[0]) == 2
    assert all(np.isfinite(x).all() for x in _leaves(res.state.params))
    pol = load_policy(res.run_dirs[0])
    assert pol.model.network == SPEC and pol.metadata["algo"] == "trpo"
    assert pol.act(np.zeros((3, 5))).shape == (3, 2)


def test_cli_network_flag_trains_the_same_run(tmp_path):
    """--network / --network-option give the run the Python arguments give (same config).

    ``--preset paper``: the Python call trains the config class's defaults, which that preset is.
    """
    argv = ["--algo", "ppo", "--preset", "paper", "--env", TOY_ENV, "--seed", "1",
            "--out", str(tmp_path),
            "--total-steps", str(CFG["total_steps"]), "--eval-every", str(2 * 512),
            "--checkpoint-every", "2", "--progress", "off", "--network", SPEC,
            "--network-option", "width=16", "--n-envs", "16", "--n-steps", "32",
            "--n-epochs", "4", "--n-minibatches", "4", "--hidden", "32", "32", "--lr", "0.003"]
    assert cli.main(argv) == 0
    (run,) = os.listdir(tmp_path)
    py = _train(tmp_path / "py")
    np.testing.assert_array_equal(load_policy(str(tmp_path / run)).act(np.ones((2, 5))),
                                  load_policy(py.run_dirs[0]).act(np.ones((2, 5))))


def test_user_network_policy_round_trip_without_training(tmp_path):
    model = ActorCritic(4, "categorical", (3,), network=residual_layernorm,
                        network_options={"width": 8})
    assert model.network == "tests.jaxrl_agents.user_networks:residual_layernorm"
    assert hash(model) == hash(ActorCritic(4, "categorical", (3,), network=model.network,
                                           network_options=[("width", 8)]))
    params = model.init(jax.random.PRNGKey(0))
    assert all(x.dtype == np.float32 for x in jax.tree_util.tree_leaves(params))
    pol = Policy(model, params, {"note": "user"})
    pol.save(str(tmp_path / "p"))
    back = Policy.load(str(tmp_path / "p"))
    obs = np.random.default_rng(1).normal(size=(5, 4))
    np.testing.assert_array_equal(pol.action_probs(obs), back.action_probs(obs))
    np.testing.assert_array_equal(pol.value(obs), back.value(obs))
    assert back.metadata == {"note": "user"}


def _no_compile(*a, **k):
    raise AssertionError("compiled before validating the network")


@pytest.mark.parametrize("network, options, match", [
    ("residual", {}, r"network: expected 'module:factory'"),
    ("no_such_module_xyz:make", {}, "network: cannot import module 'no_such_module_xyz'"),
    ("tests.jaxrl_agents.user_networks:nope", {}, "network: module .* has no callable 'nope'"),
    ("tests.jaxrl_agents.user_networks:not_modules", {},
     r"must return \(actor, critic\), two flax.linen Modules; got tuple of \['str', 'str'\]"),
    ("tests.jaxrl_agents.user_networks:wrong_width", {},
     r"actor module .* expected \(2, 2\), got \(2, 3\)"),
    ("tests.jaxrl_agents.user_networks:stateful", {}, r"'params' collection only .*batch_stats"),
    ("tests.jaxrl_agents.user_networks:crashes", {}, r"actor module .* fails on observations"),
    (SPEC, {"depth": 3}, r"network: .*residual_layernorm\(obs_dim, n_outputs.*depth"),
    (lambda obs_dim, n: None, {}, "cannot be imported back by name"),
])
def test_bad_networks_fail_before_compiling(tmp_path, monkeypatch, network, options, match):
    monkeypatch.setattr(loop, "compile_algorithm", _no_compile)
    with pytest.raises(ValueError, match=match):
        _train(tmp_path / "out", network=network, network_options=options)
    assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")


def test_bad_network_flags_are_one_line_errors(tmp_path, capsys):
    base = ["--algo", "ppo", "--env", TOY_ENV, "--out", str(tmp_path), "--progress", "off"]
    assert cli.main([*base, "--network", "tests.jaxrl_agents.user_networks:wrong_width"]) == 2
    assert "actor module" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main([*base, "--network", SPEC, "--network-option", "width"])
    assert "--network-option: expected KEY=VALUE, got 'width'" in capsys.readouterr().err
    assert not os.listdir(tmp_path)
