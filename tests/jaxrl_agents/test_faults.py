"""Bad input and faults: run-directory locks, the non-finite stop, resume checks of every run file,
renamed run directories, file permissions, unwritable outputs, and no orphan run directories.

Every training here reuses a config of test_trainer.py (PPO_CFG, or its 6-update variant), so the
compiled update comes from the cache when the files run in one session.
"""

import errno
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys

import jax
import numpy as np
import pytest

from jaxrl_agents.console import cli
from jaxrl_agents.run import loop, trainer
from jaxrl_agents.run.run_files import read_progress
from jaxrl_agents.common.fileio import (DirectoryLockedError, atomic_write, describe_os_error, load_npz,
                                 lock_directory)

from .conftest import PPO_CFG, TOY_ENV, TOY_OPTIONS

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
SHORT = {**PPO_CFG, "total_steps": 512 * 6}  # as test_resume_with_a_larger_budget_...
NAN_AT_UPDATE_6 = {"nan_after": 5 * 32 + 1}  # 32 steps per env and update: NaN rewards in update 6


def _env():
    return dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")


def _run(out, **kw):
    args = dict(algo="ppo", env=TOY_ENV, env_options=TOY_OPTIONS, config=PPO_CFG, seeds=(1, 2),
                eval_every=3 * 512, out=str(out), checkpoint_every=4, progress="off")
    args.update(kw)
    return trainer.train(**args)


def _no_compile(*a, **k):
    raise AssertionError("compiled before validating the input")


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 6-update run of seeds 1 and 2 (checkpoints at updates 3 and 6, evaluations at
    3 and 6); tests copy it before damaging it."""
    res = _run(tmp_path_factory.mktemp("finished"), config=SHORT, checkpoint_every=3)
    assert res.finished
    return res.run_dirs


def _copy_group(run_dirs, dest):
    dest.mkdir()
    return [shutil.copytree(d, dest / os.path.basename(d)) for d in run_dirs]


def _one_line_error(capsys, code, expected_code=2):
    err = capsys.readouterr().err
    assert code == expected_code, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jaxrl-train: error: "), err
    return lines[0]


# ------------------------------------------------------------------------------------------ locks
def _hold_lock(path):
    """A second real process that holds the lock of `path` until it is killed."""
    code = ("import sys\nfrom jaxrl_agents.common.fileio import lock_directory\n"
            "with lock_directory(sys.argv[1]):\n    print('locked', flush=True)\n"
            "    sys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=_env())
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_second_process_cannot_resume_a_run_in_use(finished, tmp_path, monkeypatch, capsys):
    """Before: two `jaxrl-train --resume D` at once both exited 0 and the last writer won."""
    dirs = _copy_group(finished, tmp_path / "g")
    holder = _hold_lock(dirs[1])  # the group's second member: resume locks the whole group
    try:
        p = subprocess.run([str(BIN / "jaxrl-train"), "--resume", str(dirs[0]), "--progress",
                            "off"], capture_output=True, text=True, env=_env(), timeout=600)
        assert p.returncode == 2, p.stderr
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and f"{dirs[1]}: in use by process {holder.pid}" in lines[0]

        monkeypatch.setattr(loop, "compile_algorithm", _no_compile)
        with pytest.raises(DirectoryLockedError, match="in use by process"):
            trainer.resume(str(dirs[0]), progress="off")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # kill -9 released the lock: no stale lock is left behind.
    with lock_directory(str(dirs[1])):
        pass


def test_train_and_resume_hold_the_lock_for_the_whole_run(tmp_path, monkeypatch):
    seen = []

    class Probe(loop.ProgressReporter):
        def update(self, step, eval_jt=None):
            for d in sorted((tmp_path / "out").iterdir()):
                with pytest.raises(DirectoryLockedError, match=str(d)):
                    with lock_directory(str(d)):
                        pass
                seen.append(step)
            super().update(step, eval_jt)

    monkeypatch.setattr(loop, "ProgressReporter", Probe)
    part = _run(tmp_path / "out", stop_after=5)
    assert len(seen) == 2 * 5
    trainer.resume(part.run_dirs[0], progress="off")  # from the checkpoint of update 4
    assert len(seen) == 2 * (5 + 26)
    for d in part.run_dirs:  # released at the end
        with lock_directory(d):
            pass


def test_ippo_runs_are_locked_and_leave_no_orphan(tmp_path, monkeypatch, capsys):
    from jaxrl_agents.console import parallel_env_run as ippo_cli

    from .test_ippo_cli import ENV, FLAGS

    locked = []

    class Probe(ippo_cli.MilestoneBar):
        def __call__(self, completed, total):
            (run,) = list(tmp_path.iterdir())
            with pytest.raises(DirectoryLockedError):
                with lock_directory(str(run)):
                    pass
            locked.append(completed)
            super().__call__(completed, total)

    monkeypatch.setattr(ippo_cli, "MilestoneBar", Probe)
    assert cli.main(["--algo", "ippo", "--env", ENV, "--timesteps", "128", *FLAGS, "--progress",
                     "off", "--out", str(tmp_path)]) == 0, capsys.readouterr().err
    assert locked == [64, 128]
    (run,) = list(tmp_path.iterdir())
    with lock_directory(str(run)):
        pass
    shutil.rmtree(run)

    # Before: a setting the trainer rejects after the run directory was made left it behind,
    # holding only config.json.
    code = cli.main(["--algo", "ippo", "--env", "tests.jaxrl_agents.marl_toy_envs:SpacesEnv",
                     "--n-envs", "2", "--out", str(tmp_path), "--progress", "off"])
    assert "n_envs: expected 1 for a PettingZoo ParallelEnv" in _one_line_error(capsys, code)
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------------- non-finite stop
def test_a_run_that_goes_non_finite_stops_and_keeps_the_last_finite_checkpoint(tmp_path):
    """Before: a NaN loss trained on to the end and saved an all-NaN policy and checkpoint."""
    with pytest.raises(trainer.NonFiniteError, match=r"update 6 \(steps 2561-3072\)") as info:
        _run(tmp_path, env_options=NAN_AT_UPDATE_6)
    e = info.value
    assert (e.update, e.step, e.seeds, e.checkpoint_update) == (6, 6 * 512, [1, 2], 4)
    assert "seeds 1, 2" in str(e) and "checkpoint.npz keeps update 4" in str(e)
    for d in e.run_dirs:
        ckpt = load_npz(os.path.join(d, "checkpoint.npz"))
        meta = json.loads(ckpt.pop("__meta__").tobytes())
        assert meta["meta"]["update"] == 4
        assert all(np.all(np.isfinite(a)) for a in ckpt.values() if a.dtype.kind == "f")
        rows = read_progress(os.path.join(d, "progress.csv"))
        assert [int(r["step"]) for r in rows] == [512 * u for u in range(1, 6)]
        assert list(load_npz(os.path.join(d, "evals.npz"))["step"]) == [3 * 512]
        params = load_npz(os.path.join(d, "last_policy", "params.npz"))
        assert all(np.all(np.isfinite(a)) for a in params.values())


def test_cli_reports_the_non_finite_update_in_one_line(tmp_path, capsys):
    code = cli.main(["--env", TOY_ENV, "--env-option", f"nan_after={NAN_AT_UPDATE_6['nan_after']}",
                     "--seeds", "1", "2", "--total-steps", str(512 * 30), "--eval-every",
                     str(3 * 512), "--checkpoint-every", "4", "--n-envs", "16", "--n-steps", "32",
                     "--n-epochs", "4", "--n-minibatches", "4", "--hidden", "32", "32", "--lr",
                     "3e-3", "--progress", "off", "--out", str(tmp_path)])
    line = _one_line_error(capsys, code, expected_code=1)
    assert "update 6 (steps 2561-3072) gave non-finite" in line and "pg_loss" in line


def test_the_finite_flag_is_one_bool_per_seed(toy_env, x64):
    from jaxrl_agents.run.algorithms import FINITE_STAT, all_finite, compile_algorithm, make_config

    c = compile_algorithm("ppo", toy_env, make_config("ppo", PPO_CFG))
    state = c.init(jax.numpy.stack([jax.random.PRNGKey(s) for s in (1, 2)]), toy_env.default_params)
    _, stats = c.update(state, toy_env.default_params)
    np.testing.assert_array_equal(stats[FINITE_STAT], [True, True])
    tree = {"a": np.ones((2, 3), np.float32), "b": np.array([[1.0], [np.inf]]),
            "n": np.array([1, 2])}
    np.testing.assert_array_equal(all_finite(tree), [True, False])


# -------------------------------------------------------------------------------- resume checks
def _truncate_csv(d):
    p = os.path.join(d, "progress.csv")
    lines = open(p).read().splitlines(keepends=True)
    open(p, "w").write("".join(lines[:-3]))  # rows of updates 4-6 gone


def _cut_last_row(d):
    p = os.path.join(d, "progress.csv")
    text = open(p).read()
    open(p, "w").write(text[:len(text) - len(text.splitlines()[-1]) // 2 - 1])


def _write(name, data):
    def damage(d):
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    return damage


def _half(name):
    def damage(d):
        p = os.path.join(d, name)
        b = open(p, "rb").read()
        open(p, "wb").write(b[:len(b) // 2])
    return damage


def _edit_config(**changes):
    def damage(d):
        p = os.path.join(d, "config.json")
        rc = json.load(open(p))
        for k, v in changes.items():
            if v is KeyError:
                rc.pop(k)
            elif k == "lr":
                rc["algo_config"]["lr"] = v
            else:
                rc[k] = v
        json.dump(rc, open(p, "w"))
    return damage


@pytest.mark.parametrize("member, damage, match", [
    (0, _truncate_csv, r"progress.csv: expected one row per update .* rows for 3 of them are "
                       r"missing \(first at step 2048\)"),
    (1, _truncate_csv, r"_s2/progress.csv: expected one row per update"),
    (0, _cut_last_row, r"progress.csv: line 7 has fewer fields than the header"),
    (0, lambda d: os.remove(os.path.join(d, "progress.csv")), "progress.csv: missing"),
    (0, lambda d: os.remove(os.path.join(d, "evals.npz")),
     r"evals.npz: missing, but progress.csv records evaluations at 2 steps"),
    (1, _write("progress.csv", b"\xff\xfe\x00garbage"), "progress.csv: not a readable progress"),
    (0, _half("checkpoint.npz"), "checkpoint.npz: not a readable .npz file, truncated or corrupt"),
    (0, _write("checkpoint.npz", b""), r"checkpoint.npz: not a readable .npz file \(an empty"),
    (0, _write("checkpoint.npz", b"\x80\x04garbage"), r"checkpoint.npz: .*\(not a zip archive\)"),
    (0, _half("evals.npz"), "evals.npz: not a readable .npz file"),
    (1, _write("evals.npz", b"PK\x03\x04 not really"), "evals.npz: not a readable .npz file"),
    (0, _half("config.json"), r"config.json: not valid JSON \(.* at line"),
    (0, _write("config.json", b"[1, 2]"), "config.json: expected a JSON object, got list"),
    (0, _edit_config(seeds=KeyError), "config.json: missing key 'seeds'"),
    (0, _edit_config(eval_every="50"), "config.json: 'eval_every' expected a JSON int"),
    (0, _edit_config(lr="50"), r"config.json: lr: expected a real number .*\(str\)"),
    (0, _edit_config(lr=True), r"config.json: lr: expected a real number .*\(bool\)"),
])
def test_resume_refuses_damaged_run_files_before_compiling(finished, tmp_path, monkeypatch,
                                                           capsys, member, damage, match):
    """Before: a truncated progress.csv or a deleted evals.npz was accepted (history lost), and
    corrupt files gave raw BadZipFile / EOFError / KeyError / JSON tracebacks, some after
    compiling."""
    dirs = _copy_group(finished, tmp_path / "g")
    damage(dirs[member])
    monkeypatch.setattr(loop, "compile_algorithm", _no_compile)
    with pytest.raises(ValueError, match=match):
        trainer.resume(str(dirs[0]), progress="off")
    line = _one_line_error(capsys, cli.main(["--resume", str(dirs[0]), "--progress", "off"]))
    assert str(dirs[member]) in line or "config.json" in line


def test_a_renamed_run_group_resumes(tmp_path):
    """Before: the seed group was found by directory name only, so a renamed run dir could not
    be resumed ("seed group member ... is missing")."""
    part = _run(tmp_path / "runs", stop_after=5)
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    renamed = [str(moved / "first"), str(moved / "second")]
    for old, new in zip(part.run_dirs, renamed):
        os.rename(old, new)
    res = trainer.resume(renamed[1], progress="off")
    assert res.finished and sorted(res.run_dirs) == renamed
    for d in renamed:
        assert len(read_progress(os.path.join(d, "progress.csv"))) == 30


def test_resume_refuses_a_group_member_that_is_gone(finished, tmp_path, monkeypatch):
    dirs = _copy_group(finished, tmp_path / "g")
    shutil.rmtree(dirs[1])
    monkeypatch.setattr(loop, "compile_algorithm", _no_compile)
    with pytest.raises(ValueError, match="seed 2 of this run's group .* is not next to"):
        trainer.resume(str(dirs[0]))


# ----------------------------------------------------------------------- permissions and OSError
def test_run_files_get_the_users_normal_permissions(finished, tmp_path):
    """Before: every file was 0600 (mkstemp ignores the umask)."""
    old = os.umask(0o002)
    try:
        atomic_write(str(tmp_path / "f.txt"), b"x")
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "f.txt").st_mode & 0o777 == 0o664
    expected = 0o666 & ~old
    for rel in ("config.json", "progress.csv", "evals.npz", "checkpoint.npz",
                "best_policy/params.npz", "last_policy/policy.json"):
        assert os.stat(os.path.join(finished[0], rel)).st_mode & 0o777 == expected, rel


def test_a_failed_atomic_write_keeps_the_old_file_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "keep.json"
    target.write_text("old")

    def full_disk(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device", str(dst))

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError) as info:
        atomic_write(str(target), b"new")
    assert describe_os_error(info.value) == f"{target}: No space left on device"
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["keep.json"]


def test_a_full_disk_without_a_file_name_names_the_file(tmp_path, monkeypatch, capsys):
    # Issue 37 row 9: write/fsync on a full disk raise OSError(ENOSPC) with no file name; the
    # one-line error was "No space left on device (every file written before is intact)".
    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    target = tmp_path / "keep.json"
    target.write_text("old")
    with pytest.raises(OSError) as info:
        atomic_write(str(target), b"new")
    assert info.value.errno == errno.ENOSPC
    assert describe_os_error(info.value) == f"{target}: No space left on device"
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["keep.json"]

    monkeypatch.setattr(loop, "compile_algorithm", _no_compile)  # the first file write fails
    line = _one_line_error(capsys, cli.main(["--env", TOY_ENV, "--out", str(tmp_path / "runs")]),
                           expected_code=1)
    assert line.startswith(f"jaxrl-train: error: {tmp_path / 'runs'}{os.sep}")
    assert line.endswith(": No space left on device (every file written before is intact)")


def test_cli_out_that_is_a_file_or_unwritable_gives_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(loop, "compile_algorithm", _no_compile)
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    line = _one_line_error(capsys, cli.main(["--env", TOY_ENV, "--out", str(a_file)]))
    assert f"out: expected a directory (the parent of the run directories), got '{a_file}'" in line
    assert a_file.read_text() == "mine"

    def read_only(path, *a, **k):
        raise PermissionError(errno.EACCES, "Permission denied", path)

    monkeypatch.setattr(os, "makedirs", read_only)  # the os module every run module uses
    line = _one_line_error(capsys, cli.main(["--env", TOY_ENV, "--out", str(tmp_path / "ro")]),
                           expected_code=1)
    assert line == (f"jaxrl-train: error: {tmp_path / 'ro'}: Permission denied (every file "
                    f"written before is intact)")


def test_cli_full_disk_during_training_gives_one_line(tmp_path, monkeypatch, capsys):
    def full_disk(path, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr(loop, "save_checkpoint", full_disk)
    code = cli.main(["--env", TOY_ENV, "--seeds", "1", "2", "--total-steps", str(512 * 30),
                     "--eval-every", str(3 * 512), "--checkpoint-every", "4", "--n-envs", "16",
                     "--n-steps", "32", "--n-epochs", "4", "--n-minibatches", "4", "--hidden",
                     "32", "32", "--lr", "3e-3", "--progress", "off", "--out", str(tmp_path)])
    line = _one_line_error(capsys, code, expected_code=1)
    assert line.endswith("checkpoint.npz: No space left on device (every file written before is "
                         "intact)")
    for d in tmp_path.iterdir():  # what was written before the failure is all there
        assert len(read_progress(str(d / "progress.csv"))) == 4


# --------------------------------------------------------------- Python arguments, not coerced
@pytest.mark.parametrize("kw, match", [
    (dict(argv="jaxrl-train"), "argv: expected a list of strings"),
    (dict(argv=["jaxrl-train", 3]), "argv: expected a list of strings"),
    (dict(stop_after=True), "stop_after: expected a positive integer"),
    (dict(progress=True), "progress: expected one of"),
    (dict(progress="bars"), "progress: expected one of"),
    (dict(env_options=["horizon"]), "env_options: expected a dict"),
    (dict(out=b"runs"), "out: expected a directory path"),
    (dict(config=dict(PPO_CFG, lr=float("inf"))), "lr: expected a finite number"),
    (dict(config=dict(PPO_CFG, n_envs="16")), r"n_envs: expected an integer, got '16' \(str\)"),
])
def test_train_arguments_are_checked_before_anything_is_created(tmp_path, monkeypatch, kw, match):
    monkeypatch.setattr(loop, "compile_algorithm", _no_compile)
    with pytest.raises(ValueError, match=match):
        trainer.train(**{"algo": "ppo", "env": TOY_ENV, "config": PPO_CFG,
                         "out": str(tmp_path / "out"), **kw})
    assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")


# ---------------------------------------------------- budgets beyond the compiled int32 counters
def test_a_budget_beyond_the_int32_counters_is_refused_before_any_run_directory(tmp_path,
                                                                              monkeypatch, capsys):
    # Before: --total-steps 10**30 created a run directory (config.json, .lock), then the jitted
    # update failed with a 30-line OverflowError traceback.
    from jaxrl_agents.run import loop

    monkeypatch.setattr(loop, "compile_algorithm", _no_compile)
    line = _one_line_error(capsys, cli.main(["--env", TOY_ENV, "--total-steps", str(10**30),
                                             "--out", str(tmp_path / "runs")]))
    assert "total_steps: expected at most" in line and "int32" in line and str(10**30) in line
    assert not (tmp_path / "runs").exists() or not os.listdir(tmp_path / "runs")


@pytest.mark.parametrize("algo, per_update", [("ppo", 4 * 4), ("trpo", 1)])
def test_the_budget_bound_is_the_int32_counter_of_the_update(algo, per_update):
    from jaxrl_agents.run.algorithms import make_config

    base = {"n_envs": 2, "n_steps": 8, "n_epochs": 4, "n_minibatches": 4} if algo == "ppo" else \
        {"n_envs": 2, "n_steps": 8, "batch_size": 8}
    most = (2**31 - 1) // per_update * 16
    assert make_config(algo, {**base, "total_steps": most}).n_updates * per_update <= 2**31 - 1
    with pytest.raises(ValueError, match=f"total_steps: expected at most {most:,}"):
        make_config(algo, {**base, "total_steps": most + 16})
