"""IPPO / IPPO-Lagrangian through the one trainer (run.trainer.train / resume): the run directory,
checkpoints, resume (in process and after a real kill -9), locks, the non-finite stop, plots."""

import dataclasses
import json
import os

import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_agents import Policy
from jaxrl_agents.ippo import MARLPolicy
from jaxrl_agents.console import cli
from jaxrl_agents.run import algorithms, trainer
from jaxrl_agents.common.fileio import DirectoryLockedError, load_npz, lock_directory
from jaxrl_agents.run.run_files import read_progress

from .marl_toy_envs import RiskyCore
from .killed_run import jaxrl_train, train_then_kill_9

CORE = "tests.jaxrl_agents.marl_toy_envs:RiskyCore"
NAN_CORE = "tests.jaxrl_agents.test_ippo_runs:NaNRewardCore"
# 4 envs x 16 steps = 64 steps per update, 8 updates; the toy task compiles in seconds.
CFG = {"n_envs": 4, "n_steps": 16, "hidden": (16,), "n_minibatches": 2, "lr": 3e-3,
       "cost_limit": 2.0, "lagrangian_lr": 0.2, "total_steps": 512}


@dataclasses.dataclass(frozen=True)
class NaNRewardCore(RiskyCore):
    """RiskyCore whose rewards are NaN: the first update's losses are non-finite.

    The NaN comes in through the params (every reward is ``n_risky * risky_reward / n_agents``, and
    0 x NaN is NaN): RiskyCore's own step, so the compiled update is RiskyCore's program (a cache
    hit, where a NaN written into the step was a program of its own: ~10 s of compiling).
    """

    @property
    def default_params(self):
        return {**super().default_params, "risky_reward": jnp.asarray(jnp.nan, jnp.float32)}


def _run(out, stop_after=None, algo="ippo_lagrangian", seeds=(1, 2), env=CORE, **cfg):
    cfg = {**CFG, **cfg}
    if algo == "ippo":
        cfg = {k: v for k, v in cfg.items() if k not in ("cost_limit", "lagrangian_lr")}
    return trainer.train(algo, env, {"horizon": 8}, cfg, seeds=seeds, eval_every=128,
                         checkpoint_every=3, out=str(out), progress="off", stop_after=stop_after)


def _rows(d):
    return [{k: v for k, v in r.items() if k != "wall"}
            for r in read_progress(os.path.join(d, "progress.csv"))]


def _arrays(path):
    return {k: v for k, v in load_npz(path).items() if k != "__meta__"}


def _assert_same_arrays(a, b):
    assert sorted(a) == sorted(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def _assert_same_run_files(d_full, d_res):
    """The rows (without wall times), checkpoint and evaluations of two run directories agree."""
    assert _rows(d_full) == _rows(d_res)
    for name in ("checkpoint.npz", "evals.npz"):
        _assert_same_arrays(_arrays(os.path.join(d_full, name)), _arrays(os.path.join(d_res, name)))


def test_run_directory_of_a_compiled_ippo_run(tmp_path):
    res = _run(tmp_path)
    assert res.finished and len(res.run_dirs) == 2
    d = res.run_dirs[0]
    assert os.path.basename(d).startswith("ippo_lagrangian_") and d.endswith("_s1")
    assert {"config.json", "progress.csv", "evals.npz", "checkpoint.npz", "best_policy",
            "last_policy", ".lock"} <= set(os.listdir(d))
    rc = json.loads(open(os.path.join(d, "config.json")).read())
    assert rc["algo"] == "ippo_lagrangian" and rc["algo_config"]["total_steps"] == 512
    assert sorted(rc["network"]) == ["a0", "a1"]
    rows = read_progress(os.path.join(d, "progress.csv"))
    assert [int(r["step"]) for r in rows] == [64 * u for u in range(1, 9)]
    for col in ("a0/pg_loss", "a1/lagrange_multiplier_used", "a0/cost_v_loss", "a1/episodes"):
        assert col in rows[0], col
    eval_rows = [r for r in rows if r.get("eval_return", "") != ""]
    assert [int(r["step"]) for r in eval_rows] == [128, 256, 384, 512]
    assert all("a0/eval_return" in r and "a1/eval_len" in r for r in eval_rows)
    evals = load_npz(os.path.join(d, "evals.npz"))
    assert list(evals["step"]) == [128, 256, 384, 512]
    assert evals["a0/action"].shape == (4, 8) and evals["alive"].shape == (4, 8)
    assert evals["action"].shape == (4, 8, 2)  # both agents' actions, in agent order
    # The team return is the mean of the agents' (the toy task's reward is shared).
    np.testing.assert_allclose(evals["reward"], (evals["a0/reward"] + evals["a1/reward"]) / 2)
    for which in ("best_policy", "last_policy"):
        assert sorted(os.listdir(os.path.join(d, which))) == ["a0", "a1"]
        pol = MARLPolicy.load(os.path.join(d, which, "a0"))
        probs = pol.action_probs(np.zeros(1, np.float32))
        assert probs.shape == (2,) and probs.sum() == pytest.approx(1.0, rel=1e-6)
        assert isinstance(Policy.load(os.path.join(d, which, "a1")), Policy)


def test_resume_reproduces_the_uninterrupted_run(tmp_path):
    part = _run(tmp_path / "part", stop_after=5)  # interrupted after update 5; checkpoint at 3
    assert not part.finished
    full = _run(tmp_path / "full")
    resumed = trainer.resume(part.run_dirs[0], progress="off")
    assert resumed.finished
    for d_full, d_res in zip(full.run_dirs, part.run_dirs):
        _assert_same_run_files(d_full, d_res)
        for which in ("best_policy", "last_policy"):
            for a in ("a0", "a1"):
                _assert_same_arrays(
                    _arrays(os.path.join(d_full, which, a, "params.npz")),
                    _arrays(os.path.join(d_res, which, a, "params.npz")))


def test_a_run_in_use_is_locked(tmp_path):
    part = _run(tmp_path, stop_after=3)  # the seeds of the runs above: their compiled update
    with lock_directory(part.run_dirs[0]):
        with pytest.raises(DirectoryLockedError):
            trainer.resume(part.run_dirs[0], progress="off")


def test_non_finite_update_stops_the_run(tmp_path):
    # seeds (1, 2): the program of test_jaxrl_plot_plots_an_ippo_run (NaNRewardCore's is RiskyCore's)
    with pytest.raises(trainer.NonFiniteError, match=r"update 1 \(steps 1-64\)") as info:
        _run(tmp_path, env=NAN_CORE, algo="ippo")
    assert info.value.checkpoint_update == 0 and info.value.seeds == [1, 2]
    assert len(info.value.run_dirs) == 2
    for d in info.value.run_dirs:
        assert not os.path.exists(os.path.join(d, "checkpoint.npz"))  # nothing of the bad update


def test_jaxrl_plot_plots_an_ippo_run(tmp_path):
    from jaxrl_agents.console.plot import plot_run

    res = _run(tmp_path, algo="ippo")  # the program of test_a_run_trained_on_a_parallel_env_s_core_resumes
    written = plot_run(res.run_dirs[0])
    assert [os.path.basename(p) for p in written] == ["learning_curve.png", "best_episode.png"]
    assert all(os.path.getsize(p) > 0 for p in written)


def test_python_stepped_runs_say_why_they_cannot_resume(tmp_path, capsys):
    # test_ippo_learning's Python-stepped config (test_masks_hold_on_both_paths[False]): one program
    code = cli.main(["--algo", "ippo", "--env", "tests.jaxrl_agents.marl_toy_envs:RiskyEnv",
                     "--total-steps", "128", "--n-steps", "64", "--hidden", "16", "--lr", "3e-3",
                     "--n-minibatches", "2", "--progress", "off", "--out", str(tmp_path)])
    assert code == 0, capsys.readouterr().err
    (run,) = list(tmp_path.iterdir())
    assert [int(r["step"]) for r in read_progress(str(run / "progress.csv"))] == [64, 128]
    assert cli.main(["--resume", str(run)]) == 2
    assert "cannot be checkpointed" in capsys.readouterr().err


def test_ippo_lag_is_an_alias_on_the_command_line(tmp_path, capsys):
    # CFG and seeds (1, 2) on the command line: the compiled programs of the runs above
    code = cli.main(["--algo", "ippo_lag", "--env", CORE, "--total-steps", "128",
                     "--n-envs", "4", "--n-steps", "16", "--hidden", "16", "--n-minibatches", "2",
                     "--lr", "3e-3", "--cost-limit", "2", "--lagrangian-lr", "0.2",
                     "--env-option", "horizon=8", "--seeds", "1", "2", "--eval-every", "64",
                     "--progress", "off", "--out", str(tmp_path)])
    assert code == 0, capsys.readouterr().err
    runs = sorted(tmp_path.iterdir())
    assert len(runs) == 2
    for run in runs:
        assert run.name.startswith("ippo_lagrangian_")
        assert (run / "checkpoint.npz").exists() and (run / "best_policy" / "a0").is_dir()


@pytest.mark.slow
def test_resume_after_kill_9_matches_uninterrupted(tmp_path):
    """A real `kill -9` of jaxrl-train --algo ippo_lagrangian mid-run, then --resume: the same
    rows, checkpoint and policies as a run that was never interrupted."""
    args = ["--algo", "ippo_lagrangian", "--env", CORE, "--seeds", "1", "2",
            "--total-steps", str(64 * 400), "--eval-every", str(64 * 20),
            "--checkpoint-every", "5", "--progress", "off", "--n-envs", "4", "--n-steps", "16",
            "--hidden", "16", "--n-minibatches", "2", "--lr", "3e-3", "--cost-limit", "2"]
    killed = train_then_kill_9(args, tmp_path / "killed")
    rows_at_kill = len(read_progress(os.path.join(killed[0], "progress.csv")))
    assert rows_at_kill < 400, "the run finished before it could be killed"

    assert jaxrl_train(["--resume", str(killed[1]), "--progress", "off"]) == 0
    assert jaxrl_train([*args, "--out", str(tmp_path / "full")]) == 0
    full = sorted((tmp_path / "full").iterdir())
    for d_full, d_res in zip(full, killed):
        assert _rows(d_full) == _rows(d_res)
        _assert_same_arrays(_arrays(os.path.join(d_full, "checkpoint.npz")),
                            _arrays(os.path.join(d_res, "checkpoint.npz")))
        _assert_same_arrays(_arrays(os.path.join(d_full, "last_policy", "a0", "params.npz")),
                            _arrays(os.path.join(d_res, "last_policy", "a0", "params.npz")))


def test_a_run_trained_on_a_parallel_env_s_core_resumes(tmp_path, monkeypatch):
    """Issue 35: open and resume built the environment by two roads.

    A ParallelEnv factory exposing ``env.core`` trains on the core (n_envs > 1); resume loaded the
    factory's ParallelEnv instead and could not continue. Both now take the registry's one road:
    the algorithm entry's ``environment``, asked once by each run and once by the resume.
    """
    env = "tests.jaxrl_agents.marl_toy_envs:RiskyEnv"
    entry, roads = algorithms.ALGORITHMS["ippo"], []

    def environment(spec, options, cfg):
        roads.append((spec, options))
        return entry.environment(spec, options, cfg)

    monkeypatch.setitem(algorithms.ALGORITHMS, "ippo", entry._replace(environment=environment))
    part = _run(tmp_path / "part", stop_after=5, algo="ippo", env=env)
    full = _run(tmp_path / "full", algo="ippo", env=env)
    resumed = trainer.resume(part.run_dirs[0], progress="off")
    assert resumed.finished
    assert roads == [(env, {"horizon": 8})] * 3  # the two new runs, then the resume
    for d_full, d_res in zip(full.run_dirs, part.run_dirs):
        _assert_same_run_files(d_full, d_res)
    assert json.loads(open(os.path.join(part.run_dirs[0], "config.json")).read())["env"] == env
