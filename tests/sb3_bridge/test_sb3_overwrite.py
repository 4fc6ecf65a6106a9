"""Nothing is lost: sb3-bridge never replaces a file unless asked, and writes whole files only."""

from __future__ import annotations

import os

import numpy as np
import pytest
from sb3_craft import FIXTURES

import sb3_bridge
from sb3_bridge import evaluation
from sb3_bridge.cli import main

PRECIOUS = b"a training run's own file\n"


def _one_line_error(capsys, command: str) -> str:
    err = capsys.readouterr().err
    assert err.startswith(f"sb3-bridge {command}: error: ") and err.count("\n") == 1, err
    return err


def _no_temp_files(directory) -> bool:
    return not [n for n in os.listdir(directory) if n.startswith(".tmp")]


# ------------------------------------------------------------------------ evaluate --out
def _evaluate_into(out, *extra):
    return main(["evaluate", str(FIXTURES / "trpo_box.zip"), "--env", "sb3_toy_env:make",
                 "--env-option", "max_episode_steps=3", "--out", str(out), *extra])


@pytest.mark.parametrize("name", ["evals.npz", "summary.json", "pulse.csv"])
def test_evaluate_out_refuses_a_directory_holding_its_files(tmp_path, capsys, name):
    (tmp_path / name).write_bytes(PRECIOUS)
    assert _evaluate_into(tmp_path) == 2
    err = _one_line_error(capsys, "evaluate")
    assert str(tmp_path / name) in err and "--force" in err
    assert (tmp_path / name).read_bytes() == PRECIOUS
    assert sorted(os.listdir(tmp_path)) == [name]  # refused before anything was written


def test_evaluate_out_with_force_replaces_them(tmp_path, capsys):
    (tmp_path / "evals.npz").write_bytes(PRECIOUS)
    assert _evaluate_into(tmp_path, "--force") == 0
    with np.load(tmp_path / "evals.npz") as z:
        assert z["JT"].shape == (1, 3)
    assert {"evals.npz", "summary.json", "pulse.csv"} <= set(os.listdir(tmp_path))
    assert _no_temp_files(tmp_path)


def test_evaluate_checks_every_pulse_file_of_several_episodes(tmp_path, capsys):
    (tmp_path / "pulse_1.csv").write_bytes(PRECIOUS)
    assert _evaluate_into(tmp_path, "--episodes", "2") == 2
    assert "pulse_1.csv" in _one_line_error(capsys, "evaluate")


def test_evaluate_out_into_a_run_in_use_is_refused_even_with_force(tmp_path, capsys, monkeypatch):
    """A training run holds its directory's lock; evaluate --out DIR --force must not write beside
    it, and must say so before it loads or evaluates anything."""
    from jaxrl_agents.common.fileio import lock_directory

    (tmp_path / "evals.npz").write_bytes(PRECIOUS)
    loaded = []
    import sys

    # sb3_bridge.load is also the name of the function the package exports: patch the module's.
    monkeypatch.setattr(sys.modules["sb3_bridge.load"], "load", lambda *a, **k: loaded.append(a))
    with lock_directory(str(tmp_path)):
        assert _evaluate_into(tmp_path, "--force") == 2
    err = _one_line_error(capsys, "evaluate")
    assert str(tmp_path) in err and "in use" in err
    assert not loaded and (tmp_path / "evals.npz").read_bytes() == PRECIOUS


def test_failed_evaluate_leaves_no_new_directory(tmp_path, capsys):
    out = tmp_path / "new"
    assert main(["evaluate", str(FIXTURES / "trpo_box.zip"), "--env", "no_such_module:make",
                 "--out", str(out)]) == 2
    _one_line_error(capsys, "evaluate")
    assert not out.exists()


def test_os_errors_read_file_then_reason(tmp_path, capsys, monkeypatch):
    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device", str(tmp_path / "evals.npz"))

    monkeypatch.setattr(evaluation, "write_evals", full_disk)
    assert _evaluate_into(tmp_path) == 2
    err = _one_line_error(capsys, "evaluate")
    assert f"{tmp_path / 'evals.npz'}: No space left on device" in err and "[Errno" not in err


def test_summary_json_is_never_left_half_written(tmp_path, monkeypatch):
    # A value that cannot be serialised, after several that can: a direct json.dump into the file
    # would leave a truncated summary.json behind.
    real = evaluation.summarize
    monkeypatch.setattr(evaluation, "summarize", lambda ep, *more: {**real(ep, *more), "unserialisable": object()})
    with pytest.raises(TypeError):
        _evaluate_into(tmp_path)
    assert not (tmp_path / "summary.json").exists()
    assert _no_temp_files(tmp_path)


def test_out_that_is_a_file_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "out").write_bytes(PRECIOUS)
    assert _evaluate_into(tmp_path / "out") == 2
    _one_line_error(capsys, "evaluate")
    assert (tmp_path / "out").read_bytes() == PRECIOUS


@pytest.mark.parametrize("write", [
    lambda p, **kw: evaluation.write_evals(p, [{"reward": np.ones(2), "alive": np.ones(2, bool)}], **kw),
    lambda p, **kw: evaluation.write_pulse_csv(p, np.zeros(3), 0.05, **kw),
    lambda p, **kw: evaluation.write_summary(p, {"eval_return": 1.0}, **kw),
])
def test_writers_refuse_existing_files_unless_told(tmp_path, write):
    path = tmp_path / "existing"
    path.write_bytes(PRECIOUS)
    with pytest.raises(FileExistsError, match="existing already exists.*overwrite=True"):
        write(path)
    assert path.read_bytes() == PRECIOUS
    write(path, overwrite=True)
    assert path.read_bytes() != PRECIOUS
    assert _no_temp_files(tmp_path)


# ------------------------------------------------------------------------------------ export
@pytest.fixture(scope="module")
def discrete_policy():
    return sb3_bridge.load(FIXTURES / "ppo_discrete.zip")


def test_export_refuses_an_existing_model(tmp_path, discrete_policy):
    pytest.importorskip("torch")
    sb3 = pytest.importorskip("stable_baselines3")
    path = tmp_path / "model.zip"
    path.write_bytes(PRECIOUS)
    with pytest.raises(FileExistsError, match=r"model\.zip already exists"):
        sb3_bridge.export(discrete_policy, path)
    assert path.read_bytes() == PRECIOUS
    assert sb3_bridge.export(discrete_policy, path, overwrite=True) == str(path)
    assert sb3.PPO.load(path, device="cpu").action_space.n == 2
    assert _no_temp_files(tmp_path)


def test_export_checks_the_name_sb3_would_write(tmp_path, discrete_policy):
    # No suffix: SB3 writes NAME.zip, so that is the file that must not be replaced.
    pytest.importorskip("stable_baselines3")
    (tmp_path / "model.zip").write_bytes(PRECIOUS)
    with pytest.raises(FileExistsError, match=r"model\.zip already exists"):
        sb3_bridge.export(discrete_policy, tmp_path / "model")
    assert (tmp_path / "model.zip").read_bytes() == PRECIOUS


def test_failed_export_leaves_the_old_model_whole(tmp_path, discrete_policy, monkeypatch):
    pytest.importorskip("torch")
    base_class = pytest.importorskip("stable_baselines3.common.base_class")
    from stable_baselines3.common import save_util

    def disk_full(save_path, *args, **kwargs):
        # What a full disk does to SB3's save: the file is opened, half written, then it fails.
        fh = save_util.open_path(save_path, "w", verbose=0, suffix="zip")
        fh.write(b"PK\x03\x04 half a zip")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(base_class, "save_to_zip_file", disk_full)
    path = tmp_path / "model.zip"
    path.write_bytes(PRECIOUS)
    with pytest.raises(OSError, match="No space left"):
        sb3_bridge.export(discrete_policy, path, overwrite=True)
    assert path.read_bytes() == PRECIOUS
    assert _no_temp_files(tmp_path)


def test_cli_export_needs_force_to_replace(tmp_path, capsys, discrete_policy):
    pytest.importorskip("stable_baselines3")
    discrete_policy.save(str(tmp_path / "pol"))
    out = tmp_path / "x.zip"
    out.write_bytes(PRECIOUS)
    assert main(["export", str(tmp_path / "pol"), str(out)]) == 2
    err = _one_line_error(capsys, "export")
    assert str(out) in err and "--force" in err
    assert out.read_bytes() == PRECIOUS
    assert main(["export", str(tmp_path / "pol"), str(out), "--force"]) == 0
    assert sb3_bridge.inspect(out).supported


def _read_only(monkeypatch, directory):
    """Make `directory` refuse new files, as a read-only mount does (also for root, who runs the
    tests here and whom permission bits would not stop)."""
    real = os.open

    def refusing(path, flags, *args, **kwargs):
        if os.path.dirname(os.path.abspath(path)) == str(directory) and flags & os.O_CREAT:
            raise OSError(30, "Read-only file system", path)
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing)


def test_export_into_a_read_only_directory_fails_before_building_the_model(tmp_path, discrete_policy,
                                                                           monkeypatch, capsys):
    sb3 = pytest.importorskip("stable_baselines3")

    class NeverBuilt:
        def __init__(self, *args, **kwargs):
            raise AssertionError("the SB3 model was built before the target was checked")

    monkeypatch.setattr(sb3, "PPO", NeverBuilt)
    discrete_policy.save(str(tmp_path / "pol"))
    target = tmp_path / "ro"
    target.mkdir()
    _read_only(monkeypatch, target)
    with pytest.raises(OSError) as info:
        sb3_bridge.export(discrete_policy, target / "model.zip")
    assert info.value.filename == str(target / "model.zip")  # the target, not a temporary file
    assert main(["export", str(tmp_path / "pol"), str(target / "model.zip")]) == 2
    err = _one_line_error(capsys, "export")
    assert f"{target / 'model.zip'}: cannot write it (Read-only file system)" in err and ".tmp" not in err
    assert os.listdir(target) == []
