"""What the analysis reads of a jaxrl-train run directory: through jaxrl-agents' `RunDir`.

A run directory holds config.json, progress.csv, evals.npz (every evaluation episode: J_T, time,
amplitudes, ...), checkpoint.npz and the kept policies; jaxrl-agents writes them and its
`jaxrl_agents.run.rundir.RunDir` is the one reader of them (with the trainer's format checks). This
module keeps the analysis' names for what a summary needs: the score column, the run's status
against its budget, the evaluation episodes as the gate fields, and the failed attempts a campaign
set aside beside the run (``<run>.attempt-<n>``, `jaxrl_agents.run.rundir.attempt_dirs`).

Run directories written before config.json recorded the environment's evaluation are quantgate's,
scored by ``JT_min`` (lower is better): `QUANTGATE_EVALUATION`, the fallback every `run_dir` here
is read with.
"""

from __future__ import annotations

import math
import os

import numpy as np
from jaxrl_agents.run.rundir import ATTEMPT_MARK, RunDir, attempt_dirs, to_float

__all__ = ["ATTEMPT_MARK", "QUANTGATE_EVALUATION", "run_dir", "to_float", "read_progress",
           "score_column", "run_status", "load_evals", "attempt_dirs", "restart_overhead"]

#: The evaluation of a quantgate run whose config.json does not record it (written before).
QUANTGATE_EVALUATION = {"score": "JT_min", "score_mode": "min", "plots": {}}
# The evals.npz fields a summary reads (every field is (n_evaluations, ...)).
_EVAL_FIELDS = ("step", "JT", "t", "alive", "amps", "unitarity", "concurrence")


def run_dir(path: str) -> RunDir:
    """`path` as a `RunDir` read with quantgate's fallback evaluation (`QUANTGATE_EVALUATION`)."""
    return RunDir(path, QUANTGATE_EVALUATION)


def read_progress(path: str) -> list[dict[str, str]]:
    """The rows of a run's progress.csv, as strings, empty cells left out ([] if there is none).

    Raises:
        ValueError: naming the file, when it is not a progress table (the trainer's own check).
    """
    return run_dir(path).rows()


def score_column(rc: dict) -> str:
    """The progress.csv column of the evaluation score a run ranks its policies by.

    From a config.json already read (`RunDir.score_column` reads it from the directory).
    """
    return f"eval_{(rc.get('evaluation') or QUANTGATE_EVALUATION).get('score', 'JT_min')}"


def run_status(path: str) -> tuple[str, int, int]:
    """("incomplete" | "interrupted" | "finished", steps done, steps of the budget) of a run.

    Steps done are the checkpoint's (progress.csv may hold rows past it, which a resume recomputes).
    """
    status = run_dir(path).status()
    return status.state, status.steps, status.budget


def load_evals(path: str, fields: tuple[str, ...] = _EVAL_FIELDS) -> dict[str, np.ndarray] | None:
    """A run's evaluation episodes from evals.npz (None before its first evaluation).

    Args:
        path: the run directory.
        fields: the arrays to return (default: all below; a reader that needs fewer asks for
            fewer, so an evals.npz without the others still serves it).

    Returns:
        {"step": (E,), "JT", "t", "alive", "unitarity", "concurrence": (E, K) over the K MDP steps
        of an episode, "amps": (E, K, samples per step) in rad/ns}, restricted to `fields`;
        ``alive`` as booleans.
    """
    found = run_dir(path).evaluations()
    if found is None:
        return None
    missing = [k for k in fields if k not in found]
    if missing:
        raise ValueError(f"{path}: evals.npz: expected the arrays {list(fields)}, missing {missing}")
    evals = {k: found[k] for k in fields}
    if "alive" in evals:
        evals["alive"] = evals["alive"].astype(bool)
    return evals


def restart_overhead(path: str) -> dict:
    """The failed attempts before `path` in its folder, with their steps and wall-clock summed.

    Returns ``{"steps": int, "wall_s": float, "attempts": [{"run", "seed", "steps", "wall_s",
    "best_JT"}, ...]}``; zeros and an empty list for a run that is its seed's first attempt.
    """
    attempts = []
    for attempt in attempt_dirs(os.path.dirname(os.path.normpath(path))):
        run = run_dir(attempt)
        rows = run.rows()
        scores = [to_float(r.get(run.score_column)) for r in rows]
        scores = [x for x in scores if not math.isnan(x)]
        attempts.append({"run": run.name, "seed": run.config["seed"],
                         "steps": int(to_float(rows[-1]["step"])) if rows else 0,
                         "wall_s": to_float(rows[-1].get("wall")) if rows else 0.0,
                         "best_JT": min(scores) if scores else None})
    return {"steps": sum(a["steps"] for a in attempts),
            "wall_s": sum(a["wall_s"] for a in attempts), "attempts": attempts}
