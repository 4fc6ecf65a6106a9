"""Per-seed records of a run directory and the policy for printing evaluations.

`SeedRecord` keeps one seed's progress rows, evaluation episodes and best-policy bookkeeping and
writes them (progress.csv, evals.npz, best_policy/, last_policy/); the rest decides which
evaluation lines are printed and how the best one reads.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ..common.config import AlgoConfig
from ..common.evaluation import env_fields
from ..common.fileio import atomic_savez
from .run_files import EVALS_NPZ, PROGRESS_CSV, write_progress

__all__ = ["SeedRecord", "fmt", "REPORT_LINES", "report_every_updates",
           "decade_crossed", "best_evaluation_line", "power_of_ten"]


def fmt(v) -> str:
    """A progress.csv cell: ints as ints, bools as 0/1, floats with ``repr`` (exact)."""
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return repr(float(v))


class SeedRecord:
    """Progress rows, evaluation episodes and best-policy bookkeeping of one seed's run dir.

    Evaluations are cheap and may run after every update, so their files are written with the
    checkpoint (`save`), not per evaluation: ``evals.npz`` grows with every evaluation, and
    rewriting it each time made a long run's writes quadratic. What a checkpoint does not cover yet
    is recomputed bit for bit by a resume, so deferring loses nothing.
    """

    def __init__(self, run_dir: str, seed: int):
        self.run_dir, self.seed = run_dir, seed
        self.rows: list[dict[str, str]] = []
        self.evals: dict[str, list[np.ndarray]] = {}
        self.best = math.inf  # the env's evaluation score, as a number to minimise
        self.best_step = -1
        self._unsaved_evals = False
        # policy directory name -> () -> policy: built only when written (`save`), since an
        # evaluation after every update would otherwise build two per update for nothing.
        self._unsaved_policies: dict[str, Callable[[], Any]] = {}

    def restore(self, rows: list[dict[str, str]], evals: dict[str, np.ndarray], best: float,
                best_step: int) -> None:
        """Continue from the records up to the checkpoint (`run_files.check_history`)."""
        self.rows = list(rows)
        self.evals = {k: list(v) for k, v in evals.items()}
        self.best, self.best_step = best, best_step

    def add_eval(self, step: int, episode: dict[str, np.ndarray]) -> None:
        """Record one evaluation episode (written by the next `save`)."""
        self.evals.setdefault("step", []).append(np.asarray(step, np.int64))
        for k, v in episode.items():
            self.evals.setdefault(k, []).append(np.asarray(v))
        self._unsaved_evals = True

    def set_policy(self, name: str, make_policy: Callable[[], Any]) -> None:
        """Keep ``make_policy()`` as this run's ``name`` policy (`BEST_POLICY_DIR` / `LAST_POLICY_DIR`)."""
        self._unsaved_policies[name] = make_policy

    def flush(self) -> None:
        """Rewrite progress.csv (cheap: one row per update)."""
        write_progress(os.path.join(self.run_dir, PROGRESS_CSV), self.rows)

    def save(self) -> None:
        """Write everything recorded: progress.csv, then evals.npz and the kept policies."""
        self.flush()
        if self._unsaved_evals:
            atomic_savez(os.path.join(self.run_dir, EVALS_NPZ),
                         {k: np.stack(v) for k, v in self.evals.items()})
            self._unsaved_evals = False
        for name, make_policy in self._unsaved_policies.items():
            # A `Policy`, or IPPO's `ippo.spaces.AgentPolicies` (one directory per agent).
            make_policy().save(os.path.join(self.run_dir, name))
        self._unsaved_policies = {}


REPORT_LINES = 25  # printed evaluation lines over a run, unless report_every says otherwise


def report_every_updates(cfg: AlgoConfig, eval_every_updates: int,
                         report_every: int | None) -> int:
    """Updates between printed evaluation lines: a multiple of the evaluation cadence.

    Args:
        cfg: the run's config (rollout size, number of updates).
        eval_every_updates: updates between evaluations.
        report_every: environment steps between printed lines; None: about `REPORT_LINES` lines.
    """
    wanted = (report_every // cfg.rollout_size if report_every is not None
              else cfg.n_updates // REPORT_LINES)
    return eval_every_updates * max(1, -(-wanted // eval_every_updates))


def decade_crossed(old_best: float, new_best: float) -> float | None:
    """The power of ten a falling score has just gone below (None: same decade, or no old best).

    ``decade_crossed(0.05, 0.008) == 0.01``; ``decade_crossed(0.05, 0.02) is None``; a fall over
    several decades gives the lowest one crossed. Scores <= 0 have no decade (None).
    """
    if not (math.isfinite(old_best) and old_best > 0 and 0 < new_best < old_best):
        return None
    new_decade = math.floor(math.log10(new_best))
    if new_decade >= math.floor(math.log10(old_best)):
        return None
    return 10.0 ** (new_decade + 1)


def best_evaluation_line(rows: list[dict[str, str]], best_step: int, evaluation) -> str | None:
    """The env's line (``evaluation.format``) of the evaluation at `best_step`, with its step.

    Args:
        rows: a seed's progress rows (strings, as in progress.csv).
        best_step: the step of its best evaluation (-1: none yet).
        evaluation: the env's `contracts.Evaluation`.

    Returns:
        e.g. ``minJT=3.1e-03@17.3ns  firstPE=9.10ns  1-U=2.0e-03 at step 2457600``; for envs
        that describe no evaluation ``return=12.5 at step 4096``; None without a best evaluation.
    """
    row = next((r for r in rows if int(r["step"]) == best_step and "eval_return" in r), None)
    if row is None:
        return None
    fields = {k: float(v) for k, v in env_fields(row).items() if v != ""}
    text = evaluation.format(fields) or f"return={float(row['eval_return']):.4g}"
    return f"{text} at step {best_step}"


def power_of_ten(x: float) -> str:
    """``1e-2`` for 0.01, ``1`` for 1.0, ``1e3`` for 1000.0."""
    exponent = round(math.log10(x))
    return "1" if exponent == 0 else f"1e{exponent}"

