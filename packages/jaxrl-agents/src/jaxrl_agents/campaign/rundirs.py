"""Where a campaign's run lives in its seed's folder; what the run holds is `run.rundir.RunDir`'s.

Each (entry, seed) owns one folder (`spec.Campaign.run_parent`), the ``jaxrl-train --out`` of its
run: it holds one run directory (`find_run_dir`), or for a staged entry one staged run's top
directory (`find_staged_dir`), beside the runs set aside in it (`run.rundir.set_aside_dirs`).
Reading a run (its status, progress rows, early-test verdict) goes through `RunDir`
(`read_run` gives one with the campaign's fallback score); a staged run's record through
`stages.staged_run.read_staged_run`.
"""

from __future__ import annotations

import os

from ..run.run_files import RUN_CONFIG
from ..run.rundir import ATTEMPT_MARK, INCOMPLETE_MARK, RunDir
from ..stages.staged_run import STAGED_RUN_JSON, read_staged_run

__all__ = ["find_run_dir", "find_staged_dir", "read_run", "staged_has_progress",
           "RESTART_EVALUATION"]

#: The score of a run whose config.json records no evaluation (written before it did): the
#: campaign's restart rule is stated in J_T (``below``), the progress.csv column ``eval_JT_min``.
RESTART_EVALUATION = {"score": "JT_min", "score_mode": "min", "plots": {}}


def read_run(path: str) -> RunDir:
    """`path` as a `RunDir`, scored by `RESTART_EVALUATION` where config.json records no score."""
    return RunDir(path, RESTART_EVALUATION)


def _only_one(parent: str, marker: str, what: str) -> str | None:
    """The one directory in `parent` holding `marker` (set-aside runs left out), or None.

    Raises:
        ValueError: naming `parent`, when it holds more than one.
    """
    if not os.path.isdir(parent):
        return None
    found = sorted(e.path for e in os.scandir(parent)
                   if e.is_dir() and os.path.isfile(os.path.join(e.path, marker))
                   and INCOMPLETE_MARK not in e.name and ATTEMPT_MARK not in e.name)
    if len(found) > 1:
        raise ValueError(f"{parent}: expected one {what}, found {len(found)} "
                         f"({', '.join(map(os.path.basename, found))}); move the extra ones away")
    return found[0] if found else None


def find_run_dir(parent: str) -> str | None:
    """The run directory inside `parent` (a run's ``--out``), or None if there is none yet.

    Raises:
        ValueError: naming `parent`, when it holds more than one run directory.
    """
    return _only_one(parent, RUN_CONFIG, "run directory")


def find_staged_dir(parent: str) -> str | None:
    """The staged run's top directory inside `parent` (a staged entry's ``--out``), or None.

    A folder without ``staged_run.json`` (a run killed before it wrote its record) is not one.

    Raises:
        ValueError: naming `parent`, when it holds more than one staged run.
    """
    return _only_one(parent, STAGED_RUN_JSON, "staged run")


def staged_has_progress(top: str, record: dict | None = None) -> bool:
    """Whether any attempt of the staged run has written a progress row (something to summarise).

    Args:
        top: the staged run's top directory.
        record: its staged_run.json, if already read.
    """
    record = read_staged_run(top) if record is None else record
    return any(RunDir(os.path.join(top, a["dir"])).rows() for a in record["attempts"])
