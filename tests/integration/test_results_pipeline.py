"""The issue-8 pipeline in miniature: train on the gate env with jaxrl-train, then regenerate the
results page (tables, figures, robustness maps) with ``quantgate-results runs`` from the run dirs."""

import csv
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("matplotlib")

BIN = pathlib.Path(sys.executable).parent


@pytest.mark.slow  # kept out of the default run for its 15-minute budget
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
    # the group goes on past its budget (as the issue-8 TRPO runs did)
    extend = [str(BIN / "jaxrl-train"), "--resume", str(runs[0]), "--total-steps", "1536",
              "--progress", "off"]
    done = subprocess.run(extend, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr

    page, figures = tmp_path / "results.md", tmp_path / "figures"
    make = [str(BIN / "quantgate-results"), "runs", *map(str, runs),
            "--out", str(page), "--figures", str(figures), "--robustness", "--refine", "5"]
    done = subprocess.run(make, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    # every run is in the table with the best J_T its progress.csv records
    for run in runs:
        rows = list(csv.DictReader(open(run / "progress.csv")))
        best = min(float(r["eval_JT_min"]) for r in rows if r["eval_JT_min"])
        line = next(l for l in text.splitlines() if l.startswith(f"| {run.name} |"))
        assert f"{best:.2e}" in line
        # the whole mini pulse (1.5 ns) is shorter than the paper's gate: same best, inside the limit
        assert f"| {best:.2e} (" in line
        assert (figures / f"robustness_{run.name}.png").stat().st_size > 1000
    assert "median best J_T" in text and "paper (v1 TRPO, SB3)" in text
    # each policy is mapped twice over the recool grid: its own MDP and amplitudes clipped
    section = text.split("## Robustness")[1].split("\n## ")[0]
    rows = [l.split(" | ") for l in section.splitlines() if l.startswith("| ppo_")]
    assert len(rows) == len(runs) and all(len(r) == 6 and " / " in r[-1] for r in rows)
    assert (figures / "learning_curves.png").exists()
    # GRAPE starts from exactly the pulse the policy played: its J_T is the table's short-gate J_T
    polish = text.split("polished by GRAPE")[1].split("## Commands")[0]
    for run in runs:
        main_row = next(l for l in text.splitlines() if l.startswith(f"| {run.name} |")).split(" | ")
        short_jt = main_row[6].split(" (")[0]
        cells = next(l for l in polish.splitlines() if l.startswith(f"| {run.name} |")).split(" | ")
        assert cells[2] == short_jt and float(cells[3].rstrip(" |")) <= float(cells[2])
    assert "| paper RL pulse (stored) | 17.25 | 9.49e-05 |" in polish
    assert "jaxrl-train --algo ppo" in text  # the exact command is recorded
    assert f"then `jaxrl-train --resume {runs[1].name} --total-steps 1536`" in text


def test_best_within_gate_time_reads_only_alive_steps_up_to_the_limit(tmp_path):
    """The '<= 17.25 ns' column: the minimum over evaluations of J_T at alive steps with t <= limit."""
    import numpy as np
    from quantgate_analysis import runs_page

    t = np.tile(np.arange(1, 6) * 5.0, (3, 1))          # 5, 10, 15, 20, 25 ns in each of 3 evals
    jt = np.array([[0.5, 0.4, 0.3, 1e-6, 1e-7],          # the best values lie after the limit,
                   [0.5, 2e-3, 0.2, 0.1, 0.1],           # this one is the answer,
                   [0.5, 1e-5, 0.3, 0.3, 0.3]])          # and this one is after the episode ended
    alive = np.ones_like(jt, bool)
    alive[2, 1:] = False
    np.savez(tmp_path / "evals.npz", step=np.array([100, 200, 300]), JT=jt, t=t, alive=alive)
    got = runs_page._best_within(str(tmp_path), 17.25)
    assert got == {"short_JT": 2e-3, "short_t": 10.0, "short_step": 200, "short_index": (1, 1)}
    assert runs_page._best_within(str(tmp_path), 1.0) == {}
