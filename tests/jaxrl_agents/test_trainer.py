"""Run directories, resume == uninterrupted, policies, and bad input caught before compiling."""

import json
import os

import numpy as np
import pytest

from jaxrl_agents import load_policy
from jaxrl_agents.run import loop, run_files, trainer
from jaxrl_agents.common.fileio import load_npz
from jaxrl_agents.run.run_files import read_progress

from .conftest import PPO_CFG, SEEDS, TOY_ENV, TOY_OPTIONS
from .killed_run import jaxrl_train, train_then_kill_9

RUN_FILES = {"config.json", "progress.csv", "evals.npz", "checkpoint.npz", "best_policy",
             "last_policy", ".lock"}  # .lock: the run-directory lock file (fileio.lock_directory)


def _run(out, **kw):
    # 30 updates of 512 steps; evaluation every 3 updates, checkpoint every 4.
    args = dict(algo="ppo", env=TOY_ENV, env_options=TOY_OPTIONS, config=PPO_CFG, seeds=SEEDS,
                eval_every=3 * 512, out=str(out), checkpoint_every=4, progress="off")
    args.update(kw)
    return trainer.train(**args)


def _rows_without_wall(run_dir):
    rows = read_progress(os.path.join(run_dir, trainer.PROGRESS_CSV))
    return [{k: v for k, v in r.items() if k != "wall"} for r in rows]


def test_resume_reproduces_the_uninterrupted_run(tmp_path):
    full = _run(tmp_path / "full")
    part = _run(tmp_path / "part", stop_after=11)  # killed after update 11; checkpoint at 8
    assert not part.finished
    ckpt_dir = part.run_dirs[0]
    # Evaluation episodes and policies are written with the checkpoint (evaluations 3 and 6, not
    # 9); progress.csv is also rewritten every 10 updates, so the "crash" left rows 9 and 10
    # ahead of the checkpoint: resume drops them and recomputes them.
    assert list(load_npz(os.path.join(ckpt_dir, "evals.npz"))["step"]) == [3 * 512, 6 * 512]
    assert len(read_progress(os.path.join(ckpt_dir, trainer.PROGRESS_CSV))) == 10
    resumed = trainer.resume(ckpt_dir, progress="off")
    assert resumed.finished and resumed.run_dirs == part.run_dirs

    for a, b in zip(_leaves(full.state), _leaves(resumed.state)):
        np.testing.assert_array_equal(a, b)
    for d_full, d_res in zip(full.run_dirs, resumed.run_dirs):
        assert set(os.listdir(d_res)) == RUN_FILES  # no temp files left behind
        rows_full, rows_res = _rows_without_wall(d_full), _rows_without_wall(d_res)
        assert len(rows_full) == 30 and rows_full == rows_res
        ev_full, ev_res = load_npz(os.path.join(d_full, "evals.npz")), load_npz(
            os.path.join(d_res, "evals.npz"))
        assert sorted(ev_full) == sorted(ev_res)
        for k in ev_full:
            np.testing.assert_array_equal(ev_full[k], ev_res[k])
        pa, pb = load_policy(d_full), load_policy(d_res)
        for a, b in zip(_leaves(pa.params), _leaves(pb.params)):
            np.testing.assert_array_equal(a, b)


def _leaves(tree):
    import jax

    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def test_run_directory_contents(tmp_path):
    res = _run(tmp_path)
    assert [os.path.basename(d).split("_")[2] for d in res.run_dirs] == ["s1", "s2"]
    d = res.run_dirs[1]
    cfg = json.load(open(os.path.join(d, "config.json")))
    assert cfg["seed"] == 2 and cfg["seeds"] == [1, 2] and cfg["env"] == TOY_ENV
    assert cfg["algo_config"]["n_minibatches"] == 4 and cfg["precision"]["x64"] is True
    assert cfg["env_options"] == TOY_OPTIONS and "jax" in cfg["versions"]
    header = open(os.path.join(d, "progress.csv")).readline().strip().split(",")
    assert header[:2] == ["step", "wall"] and header[2:] == sorted(header[2:])
    for field in ("eval_return", "eval_JT_min", "eval_t_JT_min", "eval_JT_end",
                  "eval_1mU_at_best", "eval_t_first_PE", "approx_kl", "clip_frac", "min_JT"):
        assert field in header
    ev = load_npz(os.path.join(d, "evals.npz"))
    n_eval, horizon = 10, 16
    np.testing.assert_array_equal(ev["step"], 512 * np.arange(3, 31, 3))
    for key in ("reward", "alive", "JT", "concurrence", "unitarity", "t"):
        assert ev[key].shape == (n_eval, horizon), key
    assert ev["amps"].shape == (n_eval, horizon, 2) and ev["alive"].dtype == bool
    pol = load_policy(d)
    assert pol.metadata["seed"] == 2 and pol.metadata["algo"] == "ppo"
    best_step = pol.metadata["step"]
    rows = read_progress(os.path.join(d, "progress.csv"))
    best_jt = min(float(r["eval_JT_min"]) for r in rows if "eval_JT_min" in r)
    assert pol.metadata["eval"]["eval_JT_min"] == best_jt
    assert load_policy(d, which="last").metadata["step"] == 512 * 30 >= best_step


def test_existing_run_directory_is_never_overwritten(tmp_path, monkeypatch):
    monkeypatch.setattr(run_files, "timestamp", lambda: "20250101-000000")
    os.makedirs(tmp_path / "ppo_20250101-000000_s1_x")
    marker = tmp_path / "ppo_20250101-000000_s1_x" / "keep.txt"
    marker.write_text("precious")
    monkeypatch.setattr(loop, "compile_algorithm", _no_compile)
    with pytest.raises(ValueError, match="already exists"):
        _run(tmp_path, seeds=(1,), tag="x")
    assert marker.read_text() == "precious"


def _no_compile(*a, **k):
    raise AssertionError("compiled before validating the input")


@pytest.mark.parametrize("kw, match", [
    (dict(algo="a2c"), "algo: expected one of"),
    (dict(env="toy_envs"), "env: expected 'module:factory'"),
    (dict(env="no_such_module_xyz:make"), "cannot import module"),
    (dict(env="tests.jaxrl_agents.toy_envs:nope"), "has no callable 'nope'"),
    (dict(env="tests.jaxrl_agents.toy_envs:not_an_env"), "lacks"),
    (dict(env_options={"colour": "red"}), "rejected"),
    (dict(config=dict(PPO_CFG, n_minibatches=5)), "n_minibatches"),
    (dict(config=dict(PPO_CFG, lr=float("nan"))), "lr: expected a number, not NaN"),
    (dict(seeds=(1, 1)), "distinct"),
    (dict(eval_every=0), "eval_every"),
    (dict(tag="a/b"), "tag"),
])
def test_bad_input_fails_before_compiling(tmp_path, monkeypatch, kw, match):
    monkeypatch.setattr(loop, "compile_algorithm", _no_compile)
    with pytest.raises(ValueError, match=match):
        _run(tmp_path / "out", **kw)
    assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")


def test_non_conforming_env_is_explained():
    from jaxrl_agents.common.envs import check_env

    from .toy_envs import Reach

    class NoFinalObs(Reach):
        def step_autoreset(self, key, state, action, params):
            obs, state, r, te, tr, info = super().step_autoreset(key, state, action, params)
            info.pop("final_obs")
            return obs, state, r, te, tr, info

    with pytest.raises(ValueError, match="final_obs"):
        check_env(NoFinalObs())


def test_resume_needs_a_checkpoint(tmp_path):
    with pytest.raises(ValueError, match="config.json"):
        trainer.resume(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="no checkpoint.npz"):
        trainer.resume(str(tmp_path))


@pytest.mark.slow
def test_resume_after_kill_9_matches_uninterrupted(tmp_path):
    """A real `kill -9` of jaxrl-train mid-run, then --resume: same parameters and rows as a run
    that was never interrupted."""
    args = ["--algo", "ppo", "--env", TOY_ENV, "--seeds", "1", "2", "--total-steps", str(512 * 400),
            "--eval-every", str(512 * 20), "--checkpoint-every", "5", "--progress", "off",
            "--n-envs", "16", "--n-steps", "32", "--n-epochs", "4", "--n-minibatches", "4",
            "--hidden", "32", "32", "--lr", "3e-3"]
    killed = train_then_kill_9(args, tmp_path / "killed")
    rows_at_kill = len(read_progress(os.path.join(killed[0], "progress.csv")))
    assert rows_at_kill < 400, "the run finished before it could be killed"

    assert jaxrl_train(["--resume", str(killed[1]), "--progress", "off"]) == 0
    assert jaxrl_train([*args, "--out", str(tmp_path / "full")]) == 0
    full = sorted((tmp_path / "full").iterdir())
    for d_full, d_res in zip(full, killed):
        assert _rows_without_wall(d_full) == _rows_without_wall(d_res)
        a, b = load_npz(os.path.join(d_full, "checkpoint.npz")), load_npz(
            os.path.join(d_res, "checkpoint.npz"))
        for k in a:
            if k != "__meta__":
                np.testing.assert_array_equal(a[k], b[k])


def test_resume_with_a_larger_budget_extends_a_finished_run(tmp_path):
    """--resume RUN --total-steps N continues past the original budget and records the extension;
    the rows already written are kept as they were."""
    from jaxrl_agents.console import cli

    short = _run(tmp_path, config={**PPO_CFG, "total_steps": 512 * 6}, checkpoint_every=3)
    assert short.finished
    before = [_rows_without_wall(d) for d in short.run_dirs]
    assert all(len(rows) == 6 for rows in before)

    with pytest.raises(ValueError, match="total_steps: expected at least the 3072 steps"):
        trainer.resume(short.run_dirs[0], progress="off", total_steps=512 * 4)
    with pytest.raises(ValueError, match="total_steps: expected a positive integer, got 0"):
        trainer.resume(short.run_dirs[0], progress="off", total_steps=0)

    assert cli.main(["--resume", short.run_dirs[1], "--total-steps", str(512 * 9),
                     "--progress", "off"]) == 0
    for d, rows in zip(short.run_dirs, before):  # both seeds of the group went on together
        after = _rows_without_wall(d)
        assert len(after) == 9 and after[:6] == rows
        assert [int(r["step"]) for r in after[6:]] == [512 * 7, 512 * 8, 512 * 9]
        with open(os.path.join(d, "config.json")) as f:
            rc = json.load(f)
        assert rc["algo_config"]["total_steps"] == 512 * 9
        assert [(e["from_total_steps"], e["to_total_steps"], e["at_step"]) for e in rc["extensions"]] \
            == [(512 * 6, 512 * 9, 512 * 6)]
    # Other settings still cannot change on resume.
    assert cli.main(["--resume", short.run_dirs[0], "--lr", "0.1", "--total-steps", "9999"]) == 2
