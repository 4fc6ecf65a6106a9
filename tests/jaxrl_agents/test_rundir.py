"""RunDir, the one reader of a run directory, on hand-made directories (nothing trains here).

What is checked: status (incomplete / interrupted / finished against the budget, and running while
a process holds the lock), the score a run declares or the caller's fallback, steps and wall time
to a threshold in either direction, the early-test verdict, the best evaluation and policy, the
spec, evaluations, set-aside attempts, and that damaged files are named.
"""

import json
import math
import os

import numpy as np
import pytest
from jaxrl_agents.common.fileio import lock_directory
from jaxrl_agents.run.checkpoint import load_checkpoint, replace_checkpoint_meta, save_checkpoint
from jaxrl_agents.run.rundir import Crossing, RunDir, attempt_dirs, to_float
from jaxrl_agents.run.spec import RunSpec

from .conftest import TOY_ENV

# 4 envs x 16 steps: 64 steps per update; 5 updates.
CONFIG = {"n_envs": 4, "n_steps": 16, "total_steps": 320, "hidden": [8]}
MIN_SCORE = {"score": "JT_min", "score_mode": "min", "plots": {}}


def _make(path, rows, evaluation=MIN_SCORE, checkpoint_step=None, **extra):
    """A run directory as the trainer leaves it: config.json, progress.csv, a checkpoint header."""
    os.makedirs(path)
    rc = {"format": "jaxrl_agents.run", "format_version": 1, "algo": "ppo", "env": TOY_ENV,
          "env_options": {}, "algo_config": CONFIG, "seed": 1, "seeds": [1],
          "group": [os.path.basename(path)], "eval_every": 64, "checkpoint_every": 1,
          "tag": "", "out": os.path.dirname(path), **extra}
    if evaluation is not None:
        rc["evaluation"] = evaluation
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(rc, f)
    columns = ["step", "wall"] + sorted({k for r in rows for k in r} - {"step", "wall"})
    with open(os.path.join(path, "progress.csv"), "w") as f:
        f.write(",".join(columns) + "\n")
        for r in rows:
            f.write(",".join(str(r.get(c, "")) for c in columns) + "\n")
    if checkpoint_step is not None:
        save_checkpoint(os.path.join(path, "checkpoint.npz"), {"x": np.zeros(1)},
                        {"update": checkpoint_step // 64, "step": checkpoint_step})
    return RunDir(path)


ROWS = [{"step": 64, "wall": 1.5, "eval_JT_min": 0.5, "eval_return": -1.0},
        {"step": 128, "wall": 3.0},  # not evaluated
        {"step": 192, "wall": 4.5, "eval_JT_min": 2e-3, "eval_return": -0.2},
        {"step": 256, "wall": 6.0, "eval_JT_min": 5e-4, "eval_return": 0.3}]


def test_status_follows_the_checkpoint_and_the_lock(tmp_path):
    none = _make(str(tmp_path / "a"), ROWS[:1])
    status = none.status()
    assert (status.state, status.steps, status.budget, status.running) == ("incomplete", 0, 320, False)
    part = _make(str(tmp_path / "b"), ROWS, checkpoint_step=192)
    assert (part.status().state, part.status().steps) == ("interrupted", 192)
    done = _make(str(tmp_path / "c"), ROWS, checkpoint_step=320)
    assert done.status().state == "finished" and done.status().label == "finished"
    with lock_directory(part.path):  # another process would see this lock the same way
        status = part.status()
        assert status.running and status.label == "running" and status.state == "interrupted"
        assert status.holder == f"process {os.getpid()}"
    assert not part.status().running


def test_a_run_stepped_from_python_ends_without_a_checkpoint(tmp_path):
    rd = _make(str(tmp_path / "p"), ROWS, checkpointed=False, timesteps=256)
    assert (rd.status().state, rd.status().steps, rd.status().budget) == ("finished", 256, 256)
    short = _make(str(tmp_path / "q"), ROWS[:2], checkpointed=False, timesteps=256)
    assert short.status().state == "incomplete"


def test_steps_and_wall_time_to_a_threshold_of_the_declared_score(tmp_path):
    rd = _make(str(tmp_path / "a"), ROWS)
    assert rd.score_column == "eval_JT_min" and rd.score_mode == "min"
    assert rd.to_threshold(1e-2) == Crossing(192, 4.5, 2e-3)
    assert rd.to_threshold(1e-3) == Crossing(256, 6.0, 5e-4)
    assert rd.to_threshold(2e-3) == Crossing(256, 6.0, 5e-4)  # strictly past it
    assert rd.to_threshold(1e-4) is None
    assert rd.best() == (256, 5e-4)
    assert [s for s, _, _ in rd.scores()] == [64, 192, 256]
    # A score to maximise is crossed upwards.
    up = _make(str(tmp_path / "b"), ROWS, {"score": "return", "score_mode": "max", "plots": {}})
    assert up.to_threshold(0.0) == Crossing(256, 6.0, 0.3) and up.best() == (256, 0.3)


def test_a_run_that_declares_no_score_takes_the_callers_fallback(tmp_path):
    rd = _make(str(tmp_path / "a"), ROWS, evaluation=None)
    assert (rd.score_field, rd.score_mode) == ("return", "max")  # the generic evaluation
    quantgate = RunDir(rd.path, MIN_SCORE)
    assert quantgate.score_column == "eval_JT_min" and quantgate.to_threshold(1e-2).step == 192


def test_the_verdict_of_an_early_test(tmp_path):
    rd = _make(str(tmp_path / "a"), ROWS)
    assert rd.verdict(1e-2, within_steps=192) == "pass"
    assert rd.verdict(1e-2, within_steps=128) == "fail"  # reached 128 without passing
    assert rd.verdict(1e-4, within_steps=1000) == "open"  # its rows have not reached 1000
    assert RunDir(str(tmp_path / "missing")).verdict(1.0, 64) == "open"


def test_spec_records_evaluations_policy_and_attempts(tmp_path):
    rd = _make(str(tmp_path / "ppo_s1"), ROWS, report_every=128, tensorboard=True)
    spec = rd.spec
    assert isinstance(spec, RunSpec) and spec.seeds == (1,) and spec.report_every == 128
    assert spec.tensorboard and spec.config["hidden"] == [8]
    assert rd.evaluations() is None and rd.best_policy is None
    np.savez(os.path.join(rd.path, "evals.npz"), step=np.array([64, 192]), reward=np.zeros((2, 3)))
    os.makedirs(os.path.join(rd.path, "best_policy"))
    assert rd.evaluations()["step"].tolist() == [64, 192]
    assert rd.best_policy == os.path.join(rd.path, "best_policy")
    for n in (2, 10, 1):
        os.makedirs(tmp_path / f"ppo_s1.attempt-{n}")
    assert [os.path.basename(p) for p in attempt_dirs(str(tmp_path))] == \
        ["ppo_s1.attempt-1", "ppo_s1.attempt-2", "ppo_s1.attempt-10"]
    assert math.isnan(to_float("")) and math.isnan(to_float(None)) and to_float("1e-3") == 1e-3


def test_damaged_files_are_named(tmp_path):
    rd = _make(str(tmp_path / "a"), ROWS)
    with open(os.path.join(rd.path, "config.json"), "w") as f:
        f.write("{not json")
    with pytest.raises(ValueError, match="config.json: not valid JSON"):
        _ = RunDir(rd.path).spec
    assert RunDir(rd.path).evaluation["score"] == "return"  # a plot still draws what it can
    with pytest.raises(ValueError, match="not a run directory"):
        _ = RunDir(str(tmp_path / "nothing")).config
    bad = _make(str(tmp_path / "b"), ROWS)
    with open(os.path.join(bad.path, "progress.csv"), "a") as f:
        f.write("x,1,,\n")
    with pytest.raises(ValueError, match=r"progress.csv: line 6: expected an integer step"):
        bad.rows()


def test_replace_checkpoint_meta_keeps_the_leaves_and_names_a_bad_file(tmp_path):
    tree = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "n": np.array([7, 8], np.int32)}
    path = str(tmp_path / "checkpoint.npz")
    save_checkpoint(path, tree, {"update": 3, "seed_slices": 2})
    replace_checkpoint_meta(path, {"update": 3})
    loaded, meta = load_checkpoint(path, tree)
    assert meta == {"update": 3}
    for k in tree:
        np.testing.assert_array_equal(loaded[k], tree[k])
        assert loaded[k].dtype == tree[k].dtype
    other = tmp_path / "other.npz"
    np.savez(other, x=np.zeros(2))
    with pytest.raises(ValueError, match=f"{other}: not a jaxrl-agents checkpoint"):
        replace_checkpoint_meta(str(other), {})
