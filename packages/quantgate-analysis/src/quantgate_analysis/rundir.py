"""What the analysis reads of a jaxrl-train run directory, through jaxrl-agents' file readers.

A run directory holds config.json, progress.csv, evals.npz (every evaluation episode: J_T, time,
amplitudes, ...), checkpoint.npz and the kept policies; jaxrl-agents writes them and its
`jaxrl_agents.run.run_files` / `jaxrl_agents.run.checkpoint` read them back with their format
checks. This module adds what a summary needs on top: the score column, the run's status against
its budget, the evaluation episodes as arrays, and the failed attempts a campaign set aside beside
the run (``<run>.attempt-<n>``, the campaign runner's restart rule).

The campaign runner (scripts/campaign/rundirs.py) reads the same files for its own decisions; when
the runner becomes jaxrl-agents' own, its public run-directory reader should replace the readers
here that repeat it (`run_status`, `score_column`, `attempt_dirs`).
"""

from __future__ import annotations

import math
import os

import numpy as np
from jaxrl_agents.run.run_files import (
    CHECKPOINT,
    EVALS_NPZ,
    PROGRESS_CSV,
    RUN_CONFIG,
    read_run_config,
)
from jaxrl_agents.run.run_files import read_progress as read_progress_table

__all__ = ["ATTEMPT_MARK", "to_float", "read_progress", "score_column", "run_status", "load_evals",
           "attempt_dirs", "restart_overhead"]

#: A failed attempt of a restarted seed is renamed ``<run>.attempt-<n>`` in its folder (kept).
ATTEMPT_MARK = ".attempt-"
# The evals.npz fields a summary reads (every field is (n_evaluations, ...)).
_EVAL_FIELDS = ("step", "JT", "t", "alive", "amps", "unitarity", "concurrence")


def to_float(text) -> float:
    """A progress.csv cell as a float (NaN for an empty or unreadable cell)."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def read_progress(run_dir: str) -> list[dict[str, str]]:
    """The rows of a run's progress.csv, as strings, empty cells left out ([] if there is none).

    Raises:
        ValueError: naming the file, when it is not a progress table (the trainer's own check).
    """
    return read_progress_table(os.path.join(run_dir, PROGRESS_CSV))


def score_column(rc: dict) -> str:
    """The progress.csv column of the evaluation score a run ranks its policies by."""
    return f"eval_{rc.get('evaluation', {}).get('score', 'JT_min')}"


def run_status(run_dir: str) -> tuple[str, int, int]:
    """("incomplete" | "interrupted" | "finished", steps done, steps of the budget) of a run.

    Steps done are the checkpoint's (progress.csv may hold rows past it, which a resume recomputes).
    """
    from jaxrl_agents.run import make_config
    from jaxrl_agents.run.checkpoint import read_checkpoint

    rc = read_run_config(os.path.join(run_dir, RUN_CONFIG))
    cfg = make_config(rc["algo"], rc["algo_config"])
    budget = cfg.n_updates * cfg.rollout_size
    ckpt = os.path.join(run_dir, CHECKPOINT)
    if not os.path.isfile(ckpt):
        return "incomplete", 0, budget
    _, header = read_checkpoint(ckpt)
    done = int(header["meta"]["step"])
    return ("finished" if done >= budget else "interrupted"), done, budget


def load_evals(run_dir: str) -> dict[str, np.ndarray] | None:
    """A run's evaluation episodes from evals.npz (None before its first evaluation).

    Returns:
        {"step": (E,), "JT", "t", "alive", "unitarity", "concurrence": (E, K) over the K MDP steps
        of an episode, "amps": (E, K, samples per step) in rad/ns}; ``alive`` as booleans.
    """
    path = os.path.join(run_dir, EVALS_NPZ)
    if not os.path.isfile(path):
        return None
    with np.load(path) as z:
        evals = {k: z[k] for k in _EVAL_FIELDS}
    evals["alive"] = evals["alive"].astype(bool)
    return evals


def attempt_dirs(parent: str) -> list[str]:
    """The failed attempts set aside in `parent` (a campaign seed's folder), in attempt order."""
    if not os.path.isdir(parent):
        return []
    found = [e.path for e in os.scandir(parent) if e.is_dir() and ATTEMPT_MARK in e.name]
    return sorted(found, key=lambda p: int(p.rsplit(ATTEMPT_MARK, 1)[1]))


def restart_overhead(run_dir: str) -> dict:
    """The failed attempts before `run_dir` in its folder, with their steps and wall-clock summed.

    Returns ``{"steps": int, "wall_s": float, "attempts": [{"run", "seed", "steps", "wall_s",
    "best_JT"}, ...]}``; zeros and an empty list for a run that is its seed's first attempt.
    """
    attempts = []
    for path in attempt_dirs(os.path.dirname(os.path.normpath(run_dir))):
        rc = read_run_config(os.path.join(path, RUN_CONFIG))
        rows = read_progress(path)
        scores = [to_float(r.get(score_column(rc))) for r in rows]
        scores = [x for x in scores if not math.isnan(x)]
        attempts.append({"run": os.path.basename(path), "seed": rc["seed"],
                         "steps": int(to_float(rows[-1]["step"])) if rows else 0,
                         "wall_s": to_float(rows[-1].get("wall")) if rows else 0.0,
                         "best_JT": min(scores) if scores else None})
    return {"steps": sum(a["steps"] for a in attempts),
            "wall_s": sum(a["wall_s"] for a in attempts), "attempts": attempts}
