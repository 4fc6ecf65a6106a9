"""`jaxrl-train --algo ippo|ippo_lag` on a ParallelEnv stepped from Python (console/parallel_env_run.py),
in-process on the toy constrained task, and the 10 % bar."""

import json
import os

import numpy as np
import pytest

from jaxrl_agents import Policy
from jaxrl_agents.console import cli
from jaxrl_agents.console.parallel_env_run import MilestoneBar
from jaxrl_agents.run import Session, trainer

ENV = "tests.jaxrl_agents.marl_toy_envs:RiskyEnv"
# Same hyper-parameters as test_ippo_learning (the compiled update is shared through the cache).
FLAGS = ["--n-steps", "64", "--hidden", "16", "--lr", "0.003", "--n-minibatches", "2"]


def test_cli_ippo_lag_writes_config_history_and_policies(tmp_path, capsys):
    code = cli.main(["--algo", "ippo_lag", "--env", ENV, "--env-option", "horizon=8",
                     "--timesteps", "128", *FLAGS, "--cost-limit", "2", "--lagrangian-lr", "0.2",
                     "--progress", "off", "--out", str(tmp_path), "--seed", "3", "--tag", "t"])
    assert code == 0, capsys.readouterr().err
    (run,) = list(tmp_path.iterdir())
    # ippo_lag is the older name of ippo_lagrangian: the run is named by the registry name.
    assert run.name.startswith("ippo_lagrangian_") and run.name.endswith("_s3_t")
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["algo_config"]["cost_limit"] == 2.0 and cfg["algo_config"]["total_steps"] == 128
    assert cfg["checkpointed"] is False  # a Python-stepped ParallelEnv cannot be checkpointed
    history = json.loads((run / "history.json").read_text())
    assert [h["step"] for h in history] == [64, 128]
    assert "lagrange_multiplier_used" in history[0]["agents"]["a0"]
    assert sorted(os.listdir(run / "policies")) == ["a0", "a1"]
    pol = Policy.load(str(run / "policies" / "a0"))
    probs = pol.action_probs(np.zeros(1, np.float32))
    assert probs.shape == (2,) and probs.sum() == pytest.approx(1.0, rel=1e-6)
    assert f"  run    {run}" in capsys.readouterr().out  # the summary block names it


def test_cli_rejects_bad_config_with_exit_code_2(tmp_path, capsys):
    code = cli.main(["--algo", "ippo", "--env", ENV, "--lr", "-1", "--out", str(tmp_path)])
    assert code == 2
    assert "lr" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written before validation


def test_the_trainer_has_no_session_for_a_parallel_env_stepped_from_python(tmp_path):
    """Issue 35: the trainer runs compiled runs only; it names what trains a ParallelEnv instead."""
    cfg = {"n_steps": 64, "hidden": (16,), "total_steps": 128}
    for start in (lambda: trainer.train("ippo", ENV, {"horizon": 8}, cfg, out=str(tmp_path)),
                  lambda: Session.open("ippo", ENV, env_options={"horizon": 8}, config=cfg,
                                       out=str(tmp_path))):
        with pytest.raises(ValueError, match=r"no session .*IPPO\(config, seed\)\.train\(env, "
                                             r"timesteps\), .*jaxrl-train --algo ippo "):
            start()
    assert not list(tmp_path.iterdir())  # refused before anything was created


def test_milestone_bar_moves_at_most_every_ten_percent():
    bar = MilestoneBar(1000, enabled=True)
    for step in range(8, 1001, 8):  # 125 progress callbacks (one per rollout of 8 steps)
        bar(min(step, 1000), 1000)
    bar(1000, 1000)
    assert bar.updates == 10 and bar._bar.n == 1000
    bar.close()
    off = MilestoneBar(1000, enabled=False)
    off(500, 1000)
    assert off._bar is None and off.updates == 1
