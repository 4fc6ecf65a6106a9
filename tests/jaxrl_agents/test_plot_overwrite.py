"""jaxrl-plot never replaces a file without --force: every output is checked before any is drawn.

The run directory is crafted (evals.npz only: what jaxrl-plot reads), so nothing compiles here.
"""

import os

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from jaxrl_agents.console import plot  # noqa: E402
from jaxrl_agents.common.fileio import atomic_savez  # noqa: E402

FIGURES = ("learning_curve.png", "best_episode.png")  # what jaxrl-plot writes
PRECIOUS = b"the user's own figure\n"
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def run_dir(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    rng = np.random.default_rng(0)
    atomic_savez(str(d / "evals.npz"), {"step": np.array([64, 128]), "reward": rng.normal(size=(2, 5)),
                                        "alive": np.ones((2, 5), bool), "action": rng.normal(size=(2, 5, 1))})
    return d


@pytest.mark.parametrize("name", FIGURES)
def test_plot_refuses_to_replace_a_users_file_in_out(run_dir, tmp_path, capsys, name):
    out = tmp_path / "figures"
    out.mkdir()
    (out / name).write_bytes(PRECIOUS)
    assert plot.main([str(run_dir), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("jaxrl-plot: error: "), err
    assert f"{out / name} already exists" in err and "--force" in err
    # Nothing written: neither the user's file replaced nor the other figure drawn beside it.
    assert (out / name).read_bytes() == PRECIOUS
    assert os.listdir(out) == [name]


def test_plot_with_force_replaces_them(run_dir, tmp_path, capsys):
    out = tmp_path / "figures"
    out.mkdir()
    (out / "learning_curve.png").write_bytes(PRECIOUS)
    assert plot.main([str(run_dir), "--out", str(out), "--force"]) == 0
    assert sorted(os.listdir(out)) == sorted(FIGURES)  # no temporary file left either
    for name in FIGURES:
        assert (out / name).read_bytes()[:8] == PNG


def test_replotting_the_default_directory_needs_force(run_dir, capsys):
    assert plot.main([str(run_dir)]) == 0
    first = (run_dir / "plots" / "best_episode.png").read_bytes()
    assert plot.main([str(run_dir)]) == 2
    assert "learning_curve.png already exists" in capsys.readouterr().err
    assert (run_dir / "plots" / "best_episode.png").read_bytes() == first
    assert plot.main([str(run_dir), "--force"]) == 0
