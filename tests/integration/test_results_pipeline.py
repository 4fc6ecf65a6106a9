"""The issue-8 pipeline in miniature: train on the gate env with jaxrl-train, then regenerate the
results page (tables, figures, robustness maps) with scripts/make_results.py from the run dirs."""

import csv
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("matplotlib")

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent


def test_short_training_then_results_page(tmp_path):
    out = tmp_path / "runs"
    train = [str(BIN / "jaxrl-train"), "--algo", "ppo", "--env", "quantgate_env:make",
             "--env-option", "pulse_length=30", "--env-option", "T=1.5",
             "--seeds", "1", "2", "--total-steps", "1024", "--n-envs", "4", "--n-steps", "128",
             "--n-epochs", "1", "--n-minibatches", "4", "--hidden", "16", "16", "--eval-every", "512",
             "--out", str(out), "--tag", "mini", "--progress", "off"]
    done = subprocess.run(train, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    runs = sorted(out.iterdir())
    assert len(runs) == 2

    page, figures = tmp_path / "results.md", tmp_path / "figures"
    make = [sys.executable, str(ROOT / "scripts" / "make_results.py"), *map(str, runs),
            "--out", str(page), "--figures", str(figures), "--robustness"]
    done = subprocess.run(make, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    # every run is in the table with the best J_T its progress.csv records
    for run in runs:
        rows = list(csv.DictReader(open(run / "progress.csv")))
        best = min(float(r["eval_JT_min"]) for r in rows if r["eval_JT_min"])
        line = next(l for l in text.splitlines() if l.startswith(f"| {run.name} |"))
        assert f"{best:.2e}" in line
        assert (figures / f"robustness_{run.name}.png").stat().st_size > 1000
    assert "median best J_T" in text and "paper (v1 TRPO, SB3)" in text
    assert (figures / "learning_curves.png").exists()
    assert "jaxrl-train --algo ppo" in text  # the exact command is recorded
