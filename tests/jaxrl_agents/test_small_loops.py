"""XLA's small-loop threshold as part of a run (jaxrl_agents/run/host/small_loops.py).

What is checked: the XLA_FLAGS edits keep every other flag; a command's new run compiles under the
default threshold and records it; a run recorded without one (every run made before) resumes in a
command under XLA's default, bit for bit like the same resume in this process; a resume in a
process whose backend started under another threshold is refused before compiling, in one line,
and a finished run, which compiles nothing, opens in any process.
The physics under both thresholds is compared in tests/quantgate_env/test_small_loop_kernels.py.
"""

from __future__ import annotations

import json
import os
import shlex

import numpy as np
import pytest
from jaxrl_agents.console import cli
from jaxrl_agents.run import trainer
from jaxrl_agents.run.host import small_loops
from jaxrl_agents.run.host.small_loops import DEFAULT_BYTES, OPTION, RECORD_KEY, flags_with, threshold_in

from .killed_run import jaxrl_train

EXTRA = "--xla_backend_extra_options"
#: a gate env small enough for a test: 10 steps an episode, 8 envs, 3 updates of 512 steps
GATE = ["--env", "quantgate_env:make", "--env-option", "pulse_length=30", "--env-option", "T=1.5",
        "--n-envs", "8", "--n-steps", "64", "--eval-every", "512", "--checkpoint-every", "1",
        "--seed", "3", "--progress", "off"]


@pytest.mark.parametrize("flags, threshold, expected", [
    (None, 5, f"{EXTRA}={OPTION}=5"),
    ("", None, ""),
    ("--xla_cpu_max_isa=AVX", 5, f"--xla_cpu_max_isa=AVX {EXTRA}={OPTION}=5"),
    (f"{EXTRA}=a=1,b --xla_cpu_max_isa=AVX", 5, f"{EXTRA}=a=1,b,{OPTION}=5 --xla_cpu_max_isa=AVX"),
    (f"{EXTRA}={OPTION}=7,a=1", 5, f"{EXTRA}=a=1,{OPTION}=5"),
    (f"--xla_cpu_max_isa=AVX {EXTRA}={OPTION}=7", None, "--xla_cpu_max_isa=AVX"),
    (f"{EXTRA}=a=1,{OPTION}=7", None, f"{EXTRA}=a=1"),
])
def test_the_threshold_is_set_and_removed_keeping_every_other_flag(flags, threshold, expected):
    assert flags_with(flags, threshold) == expected
    assert threshold_in(expected) == threshold


def test_a_malformed_threshold_in_xla_flags_is_named():
    with pytest.raises(ValueError, match=f"XLA_FLAGS: {OPTION} expects a non-negative integer"):
        threshold_in(f"{EXTRA}={OPTION}=lots")


@pytest.mark.parametrize("record, expected", [({}, None), ({RECORD_KEY: None}, None),
                                              ({RECORD_KEY: 4096}, 4096)])
def test_the_record_reads_back(record, expected):
    assert small_loops.recorded(record) == expected


@pytest.mark.parametrize("bad", [-1, "4096", True, 1.5])
def test_a_bad_record_is_named(bad):
    with pytest.raises(ValueError, match=f"{RECORD_KEY}: expected a non-negative integer"):
        small_loops.recorded({RECORD_KEY: bad})


def test_a_new_run_takes_the_default_unless_the_user_named_one(monkeypatch):
    monkeypatch.setattr(small_loops, "backend_started", lambda: False)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_max_isa=AVX")
    assert small_loops.configure_for_new_run() == DEFAULT_BYTES
    assert os.environ["XLA_FLAGS"] == f"--xla_cpu_max_isa=AVX {EXTRA}={OPTION}={DEFAULT_BYTES}"
    monkeypatch.setenv("XLA_FLAGS", f"{EXTRA}={OPTION}=2048")
    assert small_loops.configure_for_new_run() == 2048  # the user's choice is kept
    # once the backend has started, nothing is changed: what is in effect is what gets recorded
    monkeypatch.setattr(small_loops, "backend_started", lambda: True)
    monkeypatch.delenv("XLA_FLAGS")
    assert small_loops.configure_for_new_run() is None and "XLA_FLAGS" not in os.environ


# (~44 s: a jaxrl-train subprocess) test_cli.py::test_cli_trains_writes_every_file_and_plots asserts the
# same record (config.json's xla_cpu_small_loop_bytes of a command's new run) in the default run
@pytest.mark.slow
def test_a_command_s_new_run_records_the_default(tmp_path):
    assert jaxrl_train(["--algo", "trpo", *GATE, "--total-steps", "1536", "--out", str(tmp_path)]) == 0
    (run,) = tmp_path.iterdir()
    # the default, unless the test run was given a threshold of its own (a user's choice is kept)
    expected = threshold_in(os.environ.get("XLA_FLAGS")) or DEFAULT_BYTES
    assert json.loads((run / "config.json").read_text())[RECORD_KEY] == expected


def _rows(run_dir) -> list[dict]:
    import csv

    with open(os.path.join(run_dir, "progress.csv"), newline="") as f:
        return [{k: v for k, v in row.items() if k != "wall"} for row in csv.DictReader(f)]


def test_a_run_recorded_without_a_threshold_resumes_in_a_command_as_in_this_process(tmp_path):
    """Every run written before the record resumes under XLA's default, not the new runs' one.

    The gate env's propagation loops are what the threshold changes (at 8 envs the default
    threshold makes them kernels, which round differently), so a command that resumed under it
    would give other rows and parameters than the same resume in this process (XLA's default).
    """
    kw = dict(env_options={"pulse_length": 30, "T": 1.5}, seeds=(3,), eval_every=512,
              checkpoint_every=1, progress="off",
              config={"n_envs": 8, "n_steps": 64, "total_steps": 1536})
    part = trainer.train("trpo", "quantgate_env:make", out=str(tmp_path / "part"), stop_after=1, **kw)
    here = trainer.train("trpo", "quantgate_env:make", out=str(tmp_path / "here"), **kw)
    (part_dir,), (here_dir,) = part.run_dirs, here.run_dirs
    assert RECORD_KEY not in json.loads(open(os.path.join(part_dir, "config.json")).read())
    assert jaxrl_train(["--resume", part_dir, "--progress", "off"]) == 0
    assert _rows(part_dir) == _rows(here_dir) and len(_rows(here_dir)) == 3
    a, b = (np.load(os.path.join(d, "checkpoint.npz")) for d in (part_dir, here_dir))
    for k in a.files:
        if k != "__meta__":
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_a_resume_under_another_threshold_is_refused_before_compiling(tmp_path, capsys):
    run = trainer.train("trpo", "quantgate_env:make", env_options={"pulse_length": 30, "T": 1.5},
                        config={"n_envs": 8, "n_steps": 64, "total_steps": 1536}, eval_every=512,
                        checkpoint_every=1, progress="off", stop_after=1, out=str(tmp_path))
    (run_dir,) = run.run_dirs
    path = os.path.join(run_dir, "config.json")
    with open(path) as f:
        rc = json.load(f)
    here = small_loops.in_effect()  # XLA's default unless the test run was given a threshold
    other = DEFAULT_BYTES if here != DEFAULT_BYTES else DEFAULT_BYTES // 2
    with open(path, "w") as f:  # as a command's run records it
        json.dump({**rc, RECORD_KEY: other}, f)
    mtime = os.path.getmtime(os.path.join(run_dir, "checkpoint.npz"))
    with pytest.raises(ValueError, match=f"{path}: {RECORD_KEY}: the run compiled its loops under "
                                         f"{other} bytes, but this process's JAX backend started "
                                         f"under {'XLA.s default' if here is None else f'{here} bytes'}"):
        trainer.resume(run_dir, progress="off")
    assert cli.main(["--resume", run_dir, "--progress", "off"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(f"resume it in a new process: jaxrl-train --resume "
                                             f"{shlex.quote(run_dir)}")
    assert os.path.getmtime(os.path.join(run_dir, "checkpoint.npz")) == mtime  # nothing trained

    # Finished under the threshold in effect, the run compiles nothing more: any process may open
    # it (a notebook reading a finished command's run), whatever threshold it recorded.
    with open(path, "w") as f:
        json.dump(rc, f)
    assert trainer.resume(run_dir, progress="off").finished
    with open(path, "w") as f:
        json.dump({**rc, RECORD_KEY: other}, f)
    mtime = os.path.getmtime(os.path.join(run_dir, "checkpoint.npz"))
    result = trainer.resume(run_dir, progress="off")
    assert result.finished and int(result.rows[0][-1]["step"]) == 1536
    assert os.path.getmtime(os.path.join(run_dir, "checkpoint.npz")) == mtime
