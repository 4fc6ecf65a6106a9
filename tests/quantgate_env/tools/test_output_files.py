"""Files quantgate-env writes are whole or absent, never replaced unless asked, and get the user's
normal permissions (issue 12: nothing is lost)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from quantgate_env import save_pulse_csv
from quantgate_env.tools.files import atomic_open
from quantgate_env.tools.robustness_cli import OUTPUT_FILES
from quantgate_env.tools.robustness_cli import main as robustness_main

PRECIOUS = "a file the user keeps\n"


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "pulse.csv"
    target.write_text(PRECIOUS)
    with pytest.raises(RuntimeError):
        with atomic_open(target, overwrite=True) as handle:
            handle.write("half a pul")
            raise RuntimeError("disk full, say")
    assert target.read_text() == PRECIOUS
    assert os.listdir(tmp_path) == ["pulse.csv"]


def test_existing_files_are_refused_unless_overwrite(tmp_path):
    target = tmp_path / "pulse.csv"
    target.write_text(PRECIOUS)
    with pytest.raises(FileExistsError, match="refusing to overwrite") as err:
        save_pulse_csv(target, np.ones(3), 0.05)
    assert err.value.filename == str(target)
    assert target.read_text() == PRECIOUS
    save_pulse_csv(target, np.ones(3), 0.05, overwrite=True)
    assert target.read_text().splitlines()[0] == ",amplist,tlist"


def test_a_name_taken_while_writing_is_not_clobbered(tmp_path):
    target = tmp_path / "map.npz"
    with pytest.raises(FileExistsError):
        with atomic_open(target, binary=True) as handle:
            target.write_text(PRECIOUS)  # another writer gets there first
            handle.write(b"ours")
    assert target.read_text() == PRECIOUS and os.listdir(tmp_path) == ["map.npz"]


def test_files_get_the_users_permissions_not_0600(tmp_path):
    old = os.umask(0o022)
    try:
        save_pulse_csv(tmp_path / "p.csv", np.ones(2), 0.05)
    finally:
        os.umask(old)
    assert (os.stat(tmp_path / "p.csv").st_mode & 0o777) == 0o644


@pytest.mark.parametrize("name", OUTPUT_FILES)
def test_robustness_cli_never_replaces_any_of_its_outputs(tmp_path, capsys, pulse_dir, name):
    (tmp_path / name).write_text(PRECIOUS)
    code = robustness_main(["--pulse", str(pulse_dir / "RL_pulse.csv"), "--n", "1", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and name in err and err.count("\n") == 1
    assert (tmp_path / name).read_text() == PRECIOUS and sorted(os.listdir(tmp_path)) == [name]


def test_robustness_cli_reports_a_write_failure_in_one_line(tmp_path, capsys, pulse_dir, monkeypatch):
    from quantgate_env.tools import robustness

    def full_disk(self, path, **kwargs):
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr(robustness.RobustnessMap, "save_npz", full_disk)
    out = tmp_path / "map"
    code = robustness_main(["--pulse", str(pulse_dir / "RL_pulse.csv"), "--n", "1", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and f"{out / 'robustness.npz'}: No space left on device" in err and "[Errno" not in err


def test_robustness_json_is_strict_json_with_null_for_nan(tmp_path, capsys, pulse_dir, monkeypatch):
    # Issue 37 rows 1/15: a NaN was written as a bare NaN, which JavaScript's JSON.parse rejects.
    import json

    from quantgate_env.tools import robustness

    summary = robustness.RobustnessMap.summary
    monkeypatch.setattr(robustness.RobustnessMap, "summary",
                        lambda self: dict(summary(self), worst_JT=float("nan"), mean_JT=np.inf))
    assert robustness_main(["--pulse", str(pulse_dir / "RL_pulse.csv"), "--n", "1",
                            "--out", str(tmp_path / "map")]) == 0

    def refuse(name):
        raise AssertionError(f"robustness.json is not strict JSON: bare {name}")
    data = json.loads((tmp_path / "map" / "robustness.json").read_text(), parse_constant=refuse)
    assert data["worst_JT"] is None and data["mean_JT"] is None and data["n"] == 1


def test_a_write_error_without_a_file_name_names_the_target(tmp_path, monkeypatch):
    # Issue 37 row 9: os.write / fsync on a full disk raise OSError(ENOSPC) with no file name, so
    # the one-line message was "No space left on device" alone; it names the target now.
    import errno

    from quantgate_env.tools.files import describe_os_error

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    target = tmp_path / "pulse.csv"
    with pytest.raises(OSError) as info:
        with atomic_open(target) as handle:
            handle.write("0,0.0,0.0\n")
    assert info.value.errno == errno.ENOSPC
    assert describe_os_error(info.value) == f"{target}: No space left on device"
    assert os.listdir(tmp_path) == []


def _read_only(monkeypatch):
    """mkstemp as on a read-only mount (root passes permission bits, so chmod would not do)."""
    import errno
    import tempfile

    def refuse(*args, dir=None, prefix="", suffix="", **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", os.path.join(dir, f"{prefix}x{suffix}"))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)


def _never(*args, **kwargs):
    raise AssertionError("computed before --out was checked")


def test_refine_cli_checks_out_before_grape(tmp_path, capsys, pulse_dir, monkeypatch):
    # Issue 37 row 12: --out into a missing or read-only directory failed after GRAPE (11-19 s),
    # naming a temporary file; the README says the command checks first.
    from quantgate_env.tools import refine_cli

    monkeypatch.setattr(refine_cli, "refine_pulse", _never)
    monkeypatch.setattr(refine_cli, "rollout_pulse", _never)
    pulse = str(pulse_dir / "RL_pulse.csv")
    missing = tmp_path / "no_such_dir" / "r.csv"
    assert refine_cli.main([pulse, "--out", str(missing)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"quantgate-refine: error: --out: {missing}: cannot write it (No such file or directory)"
    _read_only(monkeypatch)
    assert refine_cli.main([pulse, "--out", str(tmp_path / "r.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"quantgate-refine: error: --out: {tmp_path / 'r.csv'}: cannot write it (Read-only file system)"
    assert os.listdir(tmp_path) == []


def test_robustness_cli_checks_out_before_computing(tmp_path, capsys, pulse_dir, monkeypatch):
    from quantgate_env.tools import robustness_cli

    monkeypatch.setattr(robustness_cli, "pulse_robustness", _never)
    pulse = str(pulse_dir / "RL_pulse.csv")
    (tmp_path / "notes.txt").write_text(PRECIOUS)
    assert robustness_main(["--pulse", pulse, "--n", "1", "--out", str(tmp_path / "notes.txt" / "map")]) == 2
    assert f"--out: '{tmp_path / 'notes.txt'}' is not a directory" in capsys.readouterr().err
    _read_only(monkeypatch)
    for out, named in ((tmp_path, tmp_path / "robustness.npz"), (tmp_path / "maps" / "rl", tmp_path / "maps")):
        assert robustness_main(["--pulse", pulse, "--n", "1", "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert err == f"quantgate-robustness: error: --out: {named}: cannot write it (Read-only file system)"
    assert os.listdir(tmp_path) == ["notes.txt"]
