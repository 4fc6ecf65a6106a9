"""Where a campaign run lives and how far it got, read from its run directory alone.

A staged entry's seed (``jaxrl-train --preset <recipe>``) is one staged run: a top directory
holding ``staged_run.json`` and one ordinary run directory per attempt of a stage (`find_staged_dir`,
`read_staged_run`).
"""

from __future__ import annotations

import math
import os

from ..run.algorithms import make_config
from ..run.checkpoint import read_checkpoint
from ..run.run_files import (
    CHECKPOINT,
    PROGRESS_CSV,
    RUN_CONFIG,
    read_run_config,
)
from ..run.run_files import read_progress as read_progress_table
from ..stages.staged_run import STAGED_RUN_JSON, read_staged_run

__all__ = ["find_run_dir", "run_status", "read_progress", "score_column", "to_float",
           "ATTEMPT_MARK", "INCOMPLETE_MARK", "attempt_dirs", "set_aside_dirs", "attempt_verdict",
           "find_staged_dir", "read_staged_run", "staged_has_progress"]

#: A failed attempt of a restarted seed is renamed ``<run>.attempt-<n>`` in its folder (kept).
ATTEMPT_MARK = ".attempt-"
#: A run that died before its first checkpoint is renamed ``<run>.incomplete-<n>`` (kept).
INCOMPLETE_MARK = ".incomplete-"


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


def find_run_dir(parent: str) -> str | None:
    """The run directory inside `parent` (a run's ``--out``), or None if there is none yet.

    Raises:
        ValueError: naming `parent`, when it holds more than one run directory.
    """
    if not os.path.isdir(parent):
        return None
    found = sorted(e.path for e in os.scandir(parent)
                   if e.is_dir() and os.path.isfile(os.path.join(e.path, RUN_CONFIG))
                   and INCOMPLETE_MARK not in e.name and ATTEMPT_MARK not in e.name)
    if len(found) > 1:
        raise ValueError(f"{parent}: expected one run directory, found {len(found)} "
                         f"({', '.join(map(os.path.basename, found))}); move the extra ones away")
    return found[0] if found else None


def run_status(run_dir: str) -> tuple[str, int, int]:
    """("incomplete" | "interrupted" | "finished", steps done, steps of the budget) of a run."""
    rc = read_run_config(os.path.join(run_dir, RUN_CONFIG))
    cfg = make_config(rc["algo"], rc["algo_config"])
    budget = cfg.n_updates * cfg.rollout_size
    ckpt = os.path.join(run_dir, CHECKPOINT)
    if not os.path.isfile(ckpt):
        return "incomplete", 0, budget
    _, header = read_checkpoint(ckpt)
    done = int(header["meta"]["step"])
    return ("finished" if done >= budget else "interrupted"), done, budget


def attempt_dirs(parent: str) -> list[str]:
    """The failed attempts set aside in `parent`, in attempt order."""
    if not os.path.isdir(parent):
        return []
    found = [e.path for e in os.scandir(parent) if e.is_dir() and ATTEMPT_MARK in e.name]
    return sorted(found, key=lambda p: int(p.rsplit(ATTEMPT_MARK, 1)[1]))


def set_aside_dirs(parent: str) -> list[str]:
    """Every run set aside in `parent`, failed attempts and never-checkpointed runs alike.

    A folder holding any of them has this machine's history of the run, so a committed summary
    of it does not stand for a run directory that lives elsewhere.
    """
    if not os.path.isdir(parent):
        return []
    return sorted(e.path for e in os.scandir(parent)
                  if e.is_dir() and (INCOMPLETE_MARK in e.name or ATTEMPT_MARK in e.name))


def attempt_verdict(run_dir: str, below: float, within_steps: int) -> str:
    """Whether the run reached J_T < `below` within `within_steps`: "pass", "fail" or "open".

    "open" while its evaluations have not yet reached `within_steps` without passing.
    """
    path = os.path.join(run_dir, PROGRESS_CSV)
    if not os.path.isfile(path):
        return "open"
    score = score_column(read_run_config(os.path.join(run_dir, RUN_CONFIG)))
    for row in read_progress(run_dir):
        step = to_float(row.get("step"))
        if step > within_steps:
            return "fail"
        if to_float(row.get(score)) < below:
            return "pass"
        if step == within_steps:
            return "fail"
    return "open"


def find_staged_dir(parent: str) -> str | None:
    """The staged run's top directory inside `parent` (a staged entry's ``--out``), or None.

    A folder without ``staged_run.json`` (a run killed before it wrote its record) is not one.

    Raises:
        ValueError: naming `parent`, when it holds more than one staged run.
    """
    if not os.path.isdir(parent):
        return None
    found = sorted(e.path for e in os.scandir(parent)
                   if e.is_dir() and os.path.isfile(os.path.join(e.path, STAGED_RUN_JSON)))
    if len(found) > 1:
        raise ValueError(f"{parent}: expected one staged run, found {len(found)} "
                         f"({', '.join(map(os.path.basename, found))}); move the extra ones away")
    return found[0] if found else None


def staged_has_progress(top: str, record: dict | None = None) -> bool:
    """Whether any attempt of the staged run has written a progress row (something to summarise)."""
    record = read_staged_run(top) if record is None else record
    return any(read_progress(os.path.join(top, a["dir"])) for a in record["attempts"])
