"""``--tensorboard``: event files read back with TensorBoard's own loader, also across a resume."""

import importlib.util
import json
import os

import pytest

from jaxrl_agents.console import cli
from jaxrl_agents.run import trainer
from jaxrl_agents.run.run_files import read_progress
from jaxrl_agents.run.tensorboard import TENSORBOARD_DIR, row_scalars

from .conftest import PPO_CFG, SEEDS, TOY_ENV, TOY_OPTIONS

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")

# As test_session.py: the same compiled programs (30 updates of 512 steps, eval every 3, checkpoint
# every 4).
ARGS = dict(env_options=TOY_OPTIONS, config=PPO_CFG, seeds=SEEDS, eval_every=3 * 512,
            checkpoint_every=4, progress="off")
ROLLOUT = 512


def _scalars(path):
    """{tag: [(step, value), ...]} as TensorBoard shows them (orphaned events purged)."""
    acc = event_accumulator.EventAccumulator(path, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_scalars_of_a_row_are_tagged_by_kind():
    row = {"step": "1024", "wall": "3.5", "update": "2", "pg_loss": "-0.01", "approx_kl": "0.002",
           "std": "0.3", "eval_return": "12.5", "eval_JT_min": "0.25", "eval_t_first_PE": "nan",
           "eval_len": "", "q0/pg_loss": "0.5"}
    assert row_scalars(row) == {"train/pg_loss": -0.01, "train/approx_kl": 0.002, "train/std": 0.3,
                                "eval/return": 12.5, "eval/JT_min": 0.25, "train/q0/pg_loss": 0.5}


def test_event_files_hold_every_row_and_resume_continues_the_curves(tmp_path):
    full = trainer.train("ppo", TOY_ENV, out=str(tmp_path / "full"), tensorboard=True, **ARGS)
    part = trainer.train("ppo", TOY_ENV, out=str(tmp_path / "part"), tensorboard=True,
                         stop_after=11, **ARGS)  # killed after update 11; checkpoint at 8
    d_part = part.run_dirs[0]
    tb_dir = os.path.join(d_part, TENSORBOARD_DIR)
    first_file = os.path.join(tb_dir, os.listdir(tb_dir)[0])
    # The interrupted process wrote updates 9-11 past its checkpoint: the resume computes them again.
    assert [s for s, _ in _scalars(first_file)["train/pg_loss"]][-1] == 11 * ROLLOUT

    resumed = trainer.resume(d_part, progress="off")
    assert resumed.finished
    assert len(os.listdir(tb_dir)) == 2  # one event file per process

    for d_full, d_res in zip(full.run_dirs, resumed.run_dirs):
        with open(os.path.join(d_full, "config.json")) as f:
            assert json.load(f)["tensorboard"] is True
        a = _scalars(os.path.join(d_full, TENSORBOARD_DIR))
        b = _scalars(os.path.join(d_res, TENSORBOARD_DIR))
        rows = read_progress(os.path.join(d_full, "progress.csv"))
        eval_steps = [int(r["step"]) for r in rows if r.get("eval_return", "") != ""]
        every_step = [ROLLOUT * (i + 1) for i in range(30)]
        # Evaluation fields of the env's own description, losses, KL, std, entropy, steps/s.
        assert {"eval/return", "eval/JT_min", "train/pg_loss", "train/v_loss", "train/approx_kl",
                "train/entropy", "train/std", "time/steps_per_s"} <= set(a)
        assert set(a) == set(b)
        assert [s for s, _ in a["eval/return"]] == eval_steps == list(range(1536, 15361, 1536))
        assert [s for s, _ in a["train/pg_loss"]] == every_step
        # From the second update of a process (the first one compiles).
        assert [s for s, _ in a["time/steps_per_s"]] == every_step[1:]
        for tag in a:
            if tag.startswith("time/"):
                continue
            # After the resume: each step once, in order, with the uninterrupted run's values
            # (the events of updates 9-11 the killed process wrote are purged).
            assert b[tag] == a[tag], tag
        assert [s for s, _ in b["time/steps_per_s"]] == every_step[1:8] + every_step[9:]
        assert float(rows[-1]["pg_loss"]) == pytest.approx(a["train/pg_loss"][-1][1], rel=1e-6)


def test_resume_takes_tensorboard_from_config_json(tmp_path, capsys):
    assert cli.main(["--resume", str(tmp_path), "--tensorboard"]) == 2
    assert "drop ['--tensorboard']" in capsys.readouterr().err


def test_runs_without_the_flag_write_no_key_and_no_files(tmp_path):
    res = trainer.train("ppo", TOY_ENV, out=str(tmp_path), stop_after=4, **ARGS)
    d = res.run_dirs[0]
    with open(os.path.join(d, "config.json")) as f:
        assert "tensorboard" not in json.load(f)  # a missing key is off: older runs resume as they were
    assert not os.path.exists(os.path.join(d, TENSORBOARD_DIR))
    trainer.resume(d, progress="off", stop_after=1)
    assert not os.path.exists(os.path.join(d, TENSORBOARD_DIR))


def _without_tensorboardx(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tensorboardX" else find_spec(name, *a))


@pytest.mark.parametrize("uv", [True, False])
def test_missing_tensorboardx_is_named_before_a_run_directory_exists(tmp_path, monkeypatch,
                                                                     capsys, uv):
    _without_tensorboardx(monkeypatch)
    if uv:
        monkeypatch.setenv("UV", "/usr/bin/uv")
    else:
        monkeypatch.delenv("UV", raising=False)
    out = tmp_path / "runs"
    assert cli.main(["--env", TOY_ENV, "--tensorboard", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "tensorboard: TensorBoard files need tensorboardX, the extra jaxrl-agents[tensorboard]" in err
    if uv:
        assert "uv run --extra tensorboard jaxrl-train --tensorboard" in err
    else:
        assert 'pip install "jaxrl-agents[tensorboard]"' in err
    assert not out.exists()


def test_resume_of_a_tensorboard_run_without_tensorboardx_fails_before_compiling(tmp_path,
                                                                                 monkeypatch):
    res = trainer.train("ppo", TOY_ENV, out=str(tmp_path), tensorboard=True, stop_after=4, **ARGS)
    _without_tensorboardx(monkeypatch)
    from jaxrl_agents.run import resume as resume_module

    monkeypatch.setattr(resume_module, "Run", None)  # compiling would call it
    with pytest.raises(ValueError, match=r"writes TensorBoard files .*jaxrl-agents\[tensorboard\]"):
        trainer.resume(res.run_dirs[0], progress="off")
    # The hint is the resume itself once the extra is there, not a command that starts a new run
    # (issue 37 row 10: it suggested `uv run --extra tensorboard jaxrl-train --tensorboard`).
    monkeypatch.setenv("UV", "/usr/bin/uv")
    with pytest.raises(ValueError) as e:
        trainer.resume(res.run_dirs[0], progress="off")
    hint = str(e.value).rsplit("install it with: ", 1)[1]
    assert hint == f"uv run --extra tensorboard jaxrl-train --resume {res.run_dirs[0]}"
    from jaxrl_agents.console.cli import build_parser

    args = build_parser("ppo").parse_args(hint.split()[5:])  # the real parser takes it as a resume
    assert args.resume == res.run_dirs[0] and not args.tensorboard


def test_a_malformed_tensorboard_key_is_named(tmp_path):
    res = trainer.train("ppo", TOY_ENV, out=str(tmp_path), stop_after=4, **ARGS)
    path = os.path.join(res.run_dirs[0], "config.json")
    with open(path) as f:
        rc = json.load(f)
    with open(path, "w") as f:
        json.dump({**rc, "tensorboard": "yes"}, f)
    with pytest.raises(ValueError, match="config.json: tensorboard: expected true or false"):
        trainer.resume(res.run_dirs[0], progress="off")


def test_sweep_spec_takes_tensorboard_and_names_a_bad_value(monkeypatch):
    from jaxrl_agents.sweep import SpecError, parse_spec

    def spec(**train):
        return {"train": {"env": TOY_ENV, **train}, "space": {"config": {"lr": {"values": [1e-3]}}}}

    assert parse_spec(spec(tensorboard=True)).train["tensorboard"] is True
    # Off is no key: the sweep.json of an earlier sweep is what a rerun of it parses.
    assert "tensorboard" not in parse_spec(spec(tensorboard=False)).train
    with pytest.raises(SpecError, match="train.tensorboard: expected true or false, got 'yes'"):
        parse_spec(spec(tensorboard="yes"))
    _without_tensorboardx(monkeypatch)
    with pytest.raises(SpecError, match=r"train.tensorboard: .*jaxrl-agents\[tensorboard\]"):
        parse_spec(spec(tensorboard=True))
